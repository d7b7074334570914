"""`nemori ingest --dry-run`, the estimate behind it, and the rates it scales."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nemori_cli import rates
from nemori_cli.estimate import estimate, stages
from nemori_cli.memory.profile import DEFAULT, Profile
from nemori_cli.rates import Rates
from nemori_cli.store.sqlite import SqliteStore
from tests.conftest import REPO
from tests.unit.fake_ingest import conversation, isolate, nemori, use_fakes, write_jsonl

EXAMPLE = REPO / "examples" / "chat.jsonl"


@pytest.fixture
def cache(monkeypatch, tmp_path) -> Path:
    return isolate(monkeypatch, tmp_path)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _dry(*args) -> dict:
    result = nemori("ingest", *args, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def seeded(cache, monkeypatch, tmp_path) -> Path:
    """A file where kayak and piano are episodes and garden is pending (stored by a --no-flush ingest).

    The file records the fake embedder; a preset naming it lets the dry run
    (which checks the embedder as ingest does) accept the file.
    """
    presets = tmp_path / "models.toml"
    presets.write_text('[embedder.fake]\nkind = "sentence-transformers"\nname = "fake-bow"\ndimensions = 64\n', encoding="utf-8")
    monkeypatch.setenv("NEMORI_MODELS_FILE", str(presets))
    monkeypatch.setenv("NEMORI_EMBEDDER", "fake")
    use_fakes(monkeypatch, model_id="small")  # logged as the default preset, so its history applies
    path = tmp_path / "memory.db"
    done = write_jsonl(tmp_path / "done.jsonl", conversation(("kayak", "piano")))
    assert nemori("ingest", done, "--db", path).exit_code == 0
    waiting = write_jsonl(tmp_path / "waiting.jsonl", conversation(("garden",)))
    assert nemori("ingest", waiting, "--db", path, "--no-flush").exit_code == 0  # 4 < window: stays pending
    return path


# -- the command ----------------------------------------------------------------
def test_counts_new_stored_and_pending_messages(seeded, tmp_path):
    rows = conversation(("kayak", "piano", "garden", "chess"))
    # Two identical lines without an id: told apart by occurrence, as insert_messages does.
    same = {"speaker": "Ann", "content": "ok", "timestamp": "2023-05-12T10:00:00"}
    file = write_jsonl(tmp_path / "all.jsonl", rows + [same, same])
    plan = _dry(file, "--db", seeded)
    assert plan["db_exists"] and plan["read"] == 18
    assert (plan["new"], plan["already_stored"], plan["pending"]) == (6, 12, 4)
    assert plan["messages"] == 10  # chess and the two "ok" (new) and garden (pending) will be processed
    chars = sum(len(r["content"]) for r in rows if r["id"].startswith(("garden", "chess"))) + 2 * len("ok")
    assert plan["characters"] == chars
    assert plan["rates"]["source"] == "this database"

    # After a real --no-flush ingest of the same file, the dry run finds them all stored and pending.
    assert nemori("ingest", file, "--db", seeded, "--no-flush").exit_code == 0
    again = _dry(file, "--db", seeded)
    assert (again["new"], again["already_stored"], again["pending"], again["messages"]) == (0, 18, 10, 10)


def test_database_is_byte_identical_and_no_side_files_appear(seeded, tmp_path):
    before, listing = _digest(seeded), sorted(os.listdir(tmp_path))
    file = write_jsonl(tmp_path / "more.jsonl", conversation(("chess",)))
    listing.append("more.jsonl")
    _dry(file, "--db", seeded)
    result = nemori("ingest", file, "--db", seeded, "--dry-run")
    assert result.exit_code == 0, result.output
    assert _digest(seeded) == before
    assert sorted(os.listdir(tmp_path)) == sorted(listing)  # no -wal, no -shm left behind


def test_sees_rows_still_in_another_writers_log(cache, tmp_path):
    """With a -wal file (another connection open), committed rows there count too, and nothing changes."""
    path = tmp_path / "busy.db"
    writer = SqliteStore(path)
    try:
        from nemori_cli.importers.jsonl import read_jsonl
        from nemori_cli.store import messages as message_sql

        file = write_jsonl(tmp_path / "two.jsonl", conversation(("kayak", "piano")))
        with file.open("rb") as f:
            incoming = read_jsonl(f, str(file))
        with writer.transaction():
            message_sql.insert_messages(writer, "default", incoming[:4])
        assert path.with_name("busy.db-wal").exists()
        main, log = _digest(path), _digest(path.with_name("busy.db-wal"))
        plan = _dry(file, "--db", path)
        assert (plan["new"], plan["already_stored"], plan["pending"], plan["messages"]) == (4, 4, 4, 8)
        assert _digest(path) == main and _digest(path.with_name("busy.db-wal")) == log
    finally:
        writer.close()


def test_creates_no_database(cache, tmp_path):
    path = tmp_path / "sub" / "new.db"
    plan = _dry(EXAMPLE, "--db", path)
    assert not path.exists() and not path.parent.exists()
    assert not plan["db_exists"] and plan["read"] == plan["new"] == plan["messages"] == 30
    assert plan["pending"] == plan["already_stored"] == 0


def test_json_shape_on_the_example(cache, tmp_path):
    plan = _dry(EXAMPLE, "--db", tmp_path / "x.db", "--max-tokens", "1000")
    expected = {
        "source",
        "dry_run",
        "db",
        "db_exists",
        "user",
        "model",
        "method",
        "read",
        "new",
        "already_stored",
        "changed",
        "pending",
        "messages",
        "characters",
        "windows",
        "episodes",
        "calls",
        "total_calls",
        "prompt_tokens",
        "output_tokens",
        "tokens",
        "minutes",
        "rates",
        "max_tokens",
        "messages_within_budget",
        "format",
        "conversations",
        "left_out",
        "searchable_seconds",
        "build_seconds",
    }
    assert set(plan) == expected
    assert plan["dry_run"] is True and plan["source"] == str(EXAMPLE) and plan["model"] == "small"
    assert (plan["format"], plan["conversations"], plan["left_out"]) == ("jsonl", 3, {})  # found by --format auto; sessions s1-s3
    assert plan["characters"] == sum(len(json.loads(line)["content"]) for line in EXAMPLE.read_text().splitlines())
    # small's preset cuts episodes by similarity: no partition call (models.toml)
    assert list(plan["calls"]) == ["narration", "integration", "prediction", "distillation", "consolidation"]
    assert plan["method"].endswith("--partition similarity")
    assert plan["total_calls"] == sum(plan["calls"].values()) > 0
    assert plan["tokens"] == plan["prompt_tokens"] + plan["output_tokens"] > 0
    assert plan["minutes"] > 0 and plan["rates"]["source"] == "built-in"
    assert 0 < plan["messages_within_budget"] < plan["messages"]
    assert set(plan["rates"]) == {
        "source",
        "prompt_tps",
        "output_tps",
        "prompt_tokens_per_char",
        "output_tokens_per_char",
        "seconds_per_char",
    }


def test_partition_by_the_model_is_estimated_with_its_calls_and_time(cache, tmp_path):
    by_model = _dry(EXAMPLE, "--db", tmp_path / "x.db", "--partition", "model")
    by_similarity = _dry(EXAMPLE, "--db", tmp_path / "x.db", "--partition", "similarity")
    assert list(by_model["calls"])[0] == "partition" and by_model["calls"]["partition"] > 0
    assert "partition" not in by_similarity["calls"]
    assert by_similarity["minutes"] < by_model["minutes"] and by_similarity["prompt_tokens"] < by_model["prompt_tokens"]
    assert by_model["method"].endswith("--partition model")


def test_text_report_names_the_numbers_and_the_source(cache, tmp_path):
    result = nemori("ingest", EXAMPLE, "--db", tmp_path / "x.db", "--dry-run")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "nothing written" in out and "30 new" in out and "1,508 characters" in out
    assert "LLM calls: about" in out and "minutes of LLM time with model small" in out
    assert "rates: built-in" in out and "nemori doctor" in out


def test_rates_source_follows_what_is_known(cache, tmp_path):
    db = tmp_path / "x.db"
    assert _dry(EXAMPLE, "--db", db, "--model", "tiny")["rates"]["source"] == "built-in"
    assert _dry(EXAMPLE, "--db", db, "--model", str(tmp_path / "mine.gguf"))["rates"]["source"] == "generic default"
    rates.save("tiny", Rates(500.0, 90.0, 2.0, 0.2, 0.01, "nemori doctor"), cache)
    plan = _dry(EXAMPLE, "--db", db, "--model", "tiny", "--partition", "model")  # every stage of the reference run
    assert plan["rates"]["source"] == "nemori doctor"
    # The probe's speeds, on the token counts of a real ingest (its 12-message
    # sample overstates tokens per character); 4x the built-in tiny speed.
    tiny = rates.BUILTIN["tiny"]
    assert plan["rates"]["prompt_tps"] == 500.0 and plan["rates"]["prompt_tokens_per_char"] == pytest.approx(
        tiny.prompt_tokens_per_char, rel=1e-3
    )
    assert plan["prompt_tokens"] == round(plan["characters"] * tiny.prompt_tokens_per_char)
    assert plan["rates"]["seconds_per_char"] < tiny.seconds_per_char


def test_method_flags_change_the_calls(cache, tmp_path):
    full = _dry(EXAMPLE, "--db", tmp_path / "x.db")
    bare = _dry(EXAMPLE, "--db", tmp_path / "x.db", "--no-facts", "--no-integrate")
    assert set(bare["calls"]) == {"narration"}  # small cuts episodes by similarity: no partition call
    assert bare["prompt_tokens"] < full["prompt_tokens"] and bare["minutes"] <= full["minutes"]


def test_same_errors_as_ingest(cache, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"speaker": "Ann", "content": "hi"}\n', encoding="utf-8")
    result = nemori("ingest", bad, "--db", tmp_path / "x.db", "--dry-run")
    assert result.exit_code != 0 and "timestamp" in str(result.exception)
    missing = nemori("ingest", tmp_path / "absent.jsonl", "--db", tmp_path / "x.db", "--dry-run")
    assert "no such file" in str(missing.exception)
    unknown = nemori("ingest", EXAMPLE, "--db", tmp_path / "x.db", "--dry-run", "--model", "nope")
    assert "unknown model" in str(unknown.exception)
    assert not (tmp_path / "x.db").exists()


def test_refuses_another_embedder_as_ingest_does(seeded, monkeypatch):
    monkeypatch.delenv("NEMORI_EMBEDDER")
    result = nemori("ingest", EXAMPLE, "--db", seeded, "--dry-run")
    assert "was built with embedder fake-bow:64, not all-MiniLM-L6-v2:384" in str(result.exception)


def test_refuses_a_method_the_database_was_not_built_with(seeded, tmp_path):
    before = _digest(seeded)
    result = nemori("ingest", EXAMPLE, "--db", seeded, "--dry-run", "--memory", "summary")
    assert result.exception is not None and "Mixing methods" in str(result.exception)
    assert _digest(seeded) == before


def test_loads_no_model_library(cache, tmp_path):
    """Through the real entry point: exit 0, and neither llama.cpp nor torch is imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEMORI_")}
    env["NEMORI_CACHE_DIR"] = str(cache)
    code = (
        "import sys; from nemori_cli.cli.app import main; sys.argv = ['nemori', *sys.argv[1:]]\n"
        "try:\n    main()\nfinally:\n"
        "    heavy = [m for m in ('torch', 'sentence_transformers', 'llama_cpp') if m in sys.modules]\n"
        "    sys.stderr.write(f'HEAVY={heavy}\\n')\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, "ingest", str(EXAMPLE), "--db", str(tmp_path / "x.db"), "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "HEAVY=[]" in run.stderr and "dry run" in run.stdout


# -- rates ------------------------------------------------------------------------
def test_rates_save_and_load_round_trip(tmp_path):
    first = Rates(100.0, 30.0, 1.5, 0.2, 0.02, "nemori doctor")
    other = Rates(7.0, 2.0, 1.0, 0.1, 0.5, "nemori doctor")
    rates.save("small", first, tmp_path / "c")
    rates.save("base", other, tmp_path / "c")
    assert rates.load("small", tmp_path / "c") == first and rates.load("base", tmp_path / "c") == other
    assert rates.load("tiny", tmp_path / "c") is None
    changed = Rates(120.0, 30.0, 1.5, 0.2, 0.02, "nemori doctor")
    rates.save("small", changed, tmp_path / "c")
    assert rates.load("small", tmp_path / "c") == changed and rates.load("base", tmp_path / "c") == other
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["rates.json"]  # no temporary file left


def test_a_broken_rates_file_counts_as_none(tmp_path):
    (tmp_path / "rates.json").write_text("{not json", encoding="utf-8")
    assert rates.load("small", tmp_path) is None
    assert rates.best(None, "u", "small", "small", cache_dir=tmp_path) == rates.BUILTIN["small"]


def test_from_database_after_a_fake_ingest(seeded):
    db = SqliteStore(seeded, create=False)
    try:
        found = rates.from_database(db, "default", "small")
        assert rates.from_database(db, "default", "other-model") is None
        assert rates.from_database(db, "nobody", "small") is None
        calls = db.one("SELECT sum(prompt_tokens) AS p, sum(completion_tokens) AS c FROM llm_calls WHERE user_id = 'default'")
        chars = db.one("SELECT sum(length(content)) AS n FROM messages WHERE episode_id IS NOT NULL")["n"]
    finally:
        db.close()
    assert found is not None and found.source == "this database"
    assert found.prompt_tokens_per_char == pytest.approx(calls["p"] / chars)
    assert found.output_tokens_per_char == pytest.approx(calls["c"] / chars)
    assert found.prompt_tps > 0 and found.output_tps > 0 and found.seconds_per_char > 0
    assert rates.best(None, "default", "small", "small") == rates.BUILTIN["small"]


def test_builtin_rates_come_from_the_reference_run():
    small = rates.BUILTIN["small"]
    assert small.prompt_tokens_per_char == pytest.approx(21_553 / 14_379)
    assert small.output_tokens_per_char == pytest.approx(2_454 / 14_379)
    assert rates.BUILTIN["tiny"].seconds_per_char == pytest.approx(small.seconds_per_char / 4)
    assert rates.BUILTIN["base"].seconds_per_char == pytest.approx(small.seconds_per_char * 3)
    assert rates.best(None, "u", "/models/mine.gguf", "/models/mine.gguf").source == "generic default"


# -- the estimate -------------------------------------------------------------------
def test_estimate_reproduces_the_reference_run():
    """92 messages in windows of 20 with `small`: the calls and tokens the run really made, roughly."""
    est = estimate(92, 14_379, window=20, profile=DEFAULT, rates=rates.BUILTIN["small"])
    assert est.windows == 7 and est.episodes == 15  # the ratios are read from measured.py (issue 43): 92 / 15 a episode
    assert est.calls == {"partition": 7, "narration": 15, "integration": 1, "prediction": 4, "distillation": 15, "consolidation": 2}
    assert est.prompt_tokens == 21_553 and est.output_tokens == 2_454
    assert est.seconds == pytest.approx(314.3, rel=0.01)


def test_estimate_of_nothing_is_zero():
    est = estimate(0, 0, window=20, profile=DEFAULT, rates=rates.BUILTIN["small"])
    assert est.total_calls == 0 and est.tokens == 0 and est.seconds == 0


def test_stages_follow_the_method():
    assert stages(DEFAULT) == ("partition", "narration", "integration", "prediction", "distillation", "consolidation")
    assert stages(Profile(memory="summary", integrate=False)) == ("partition", "narration", "summary")
    assert stages(Profile(memory="naive-rag", distill="direct", facts=True)) == ("partition", "narration", "integration", "distillation")


def test_amem_estimates_count_a_note_and_a_link_decision_per_message():
    assert stages(Profile(memory="amem")) == ("note", "linking")
    assert stages(Profile(memory="nemori+amem", facts=True))[-2:] == ("note", "linking")
    est = estimate(92, 14_379, window=20, profile=Profile(memory="amem"), rates=rates.BUILTIN["small"])
    assert est.calls == {"note": 92, "linking": 91} and est.episodes == 0 and est.windows == 0
    native = estimate(92, 14_379, window=20, profile=DEFAULT, rates=rates.BUILTIN["small"])
    both = estimate(92, 14_379, window=20, profile=Profile(memory="nemori+amem", facts=True), rates=rates.BUILTIN["small"])
    # 15 estimated episodes (92 messages at the reference run's 92 / 15 a episode) at 17 facts per 15 episodes
    assert both.calls["note"] == both.calls["linking"] == 17 and "consolidation" not in both.calls
    assert both.seconds > native.seconds  # notes cost more than the consolidation they replace
