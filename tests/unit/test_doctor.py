"""`nemori doctor` with the fake LLM and embedder: checks, the probe's figures, the verdict, the CLI."""

from __future__ import annotations

import hashlib
import json
import sys
import types

import pytest

from nemori_cli import deps
from nemori_cli.config import Settings
from nemori_cli.doctor import sample, verdict
from nemori_cli.doctor.run import run
from nemori_cli.embed.fake import FakeEmbedder
from tests.support.doctor_world import fakes, sensible


def nonsense_for(stage_title: str):
    def answer(messages, schema):
        if schema["title"] == stage_title:
            return "I think the answer is probably yes"
        return sensible(messages, schema)

    return answer


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A models file with a small 'GGUF' (verified by its sha256), a dead endpoint, and a private cache."""
    model = tmp_path / "fake.gguf"
    model.write_bytes(b"GGUF" + bytes(1000))
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    presets = tmp_path / "models.toml"
    presets.write_text(
        f'[llm.fake]\nkind = "gguf"\npath = "{model}"\nsha256 = "{sha}"\n\n'
        '[llm.dead]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "nothing"\n'
    )
    monkeypatch.setenv("NEMORI_MODELS_FILE", str(presets))
    monkeypatch.setenv("NEMORI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NEMORI_DB", str(tmp_path / "never-opened.db"))
    return tmp_path


def doctor(model: str = "fake", answer=sensible, **kw):
    build_llm, build_embedder = fakes(answer)
    return run(Settings.from_env(model=model), build_llm=build_llm, build_embedder=build_embedder, **kw)


def test_a_healthy_model_is_fit_with_figures_for_every_stage(env):
    report = doctor()
    assert all(c.ok for c in report.checks), [c for c in report.checks if not c.ok]
    names = [c.name for c in report.checks]
    assert names[:3] == ["python", "sqlite-vec", "fts5"] and "model file" in names and "embedder" in names
    assert "verified now" in next(c.detail for c in report.checks if c.name == "model file")
    assert report.verdict == verdict.FIT and report.exit_code == 0
    stages = report.stages
    assert list(stages) == ["partition", "narration", "integration", "prediction", "distillation", "consolidation", "answer"]
    assert (stages["partition"]["calls"], stages["narration"]["calls"], stages["integration"]["calls"]) == (1, 2, 2)
    assert (stages["prediction"]["calls"], stages["distillation"]["calls"], stages["answer"]["calls"]) == (2, 2, 1)
    assert stages["consolidation"]["calls"] >= 2  # the self-check's two pairs at least
    for s in stages.values():
        assert s["status"] == "ok" and s["valid_first_attempt"] == s["calls"] and s["fallbacks"] == 0
        assert s["prompt_tokens"] > 0 and s["output_tokens"] > 0 and s["seconds"] > 0 and s["tokens_per_s"] > 0
    o = report.overall
    assert o["schema_valid_rate"] == 1.0 and o["fallback_rate"] == 0.0
    assert o["calls"] == sum(s["calls"] for s in stages.values())
    assert o["sample_messages"] == 12 and o["seconds_per_100_messages"] > 0
    assert report.sample_answer == "On 13 March 2024."


def test_the_model_file_is_not_hashed_twice(env):
    doctor(probe=False)
    again = doctor(probe=False)
    assert "verified before (cached)" in next(c.detail for c in again.checks if c.name == "model file")


def test_nonsense_for_one_stage_is_counted_and_not_fit(env):
    report = doctor(answer=nonsense_for("Partition"))
    p = report.stages["partition"]
    assert (p["calls"], p["valid_first_attempt"], p["retries"], p["failed"], p["fallbacks"]) == (1, 0, 1, 1, 1)
    assert p["status"] == "no valid answer"
    assert report.stages["narration"]["status"] == "ok"  # the fallback split still gave it groups
    assert report.verdict == verdict.USABLE and report.exit_code == 0
    assert any("partition" in line for line in report.advice)
    assert any("--model base" in line for line in report.advice)


def test_a_model_that_cannot_answer_questions_is_told_what_ask_does_then(env):
    report = doctor(answer=nonsense_for("Answer"))
    assert report.stages["answer"]["fallbacks"] == 1 and report.verdict == verdict.USABLE
    assert any(line.startswith("answer:") and "nemori ask" in line for line in report.advice)


def test_a_failed_self_check_is_a_fallback_with_its_cost_named(env):
    def always_yes(messages, schema):
        return {"outdated": True} if schema["title"] == "Outdated" else sensible(messages, schema)

    report = doctor(answer=always_yes)
    assert report.stages["consolidation"]["fallbacks"] == 1
    assert report.verdict != verdict.FIT
    assert any("never retire an outdated fact" in line for line in report.advice)


def test_a_model_that_never_answers_is_not_fit(env):
    report = doctor(answer="nonsense")
    assert report.overall["schema_valid_rate"] == 0.0
    assert report.verdict == verdict.NOT_FIT and report.exit_code == 1


def test_a_crashing_stage_is_reported_and_later_stages_skipped(env):
    def broken(messages, schema):
        if schema["title"] == "Narrative":
            raise RuntimeError("backend exploded")
        return sensible(messages, schema)

    report = doctor(answer=broken)
    assert report.stages["narration"]["status"] == "crashed"
    assert "backend exploded" in report.stages["narration"]["error"]
    assert report.stages["distillation"]["status"] == "skipped"
    assert report.verdict == verdict.NOT_FIT


def test_no_probe_runs_only_the_install_checks(env):
    def never(settings):
        raise AssertionError("the model must not be loaded with --no-probe")

    report = run(Settings.from_env(model="fake"), probe=False, build_llm=never, build_embedder=lambda s: FakeEmbedder())
    assert report.stages == {} and report.overall == {}
    assert report.verdict == verdict.NOT_PROBED and report.exit_code == 0
    assert "model loads" not in [c.name for c in report.checks]


def test_the_users_database_is_never_touched(env):
    doctor()
    assert not (env / "never-opened.db").exists()


def test_rates_are_handed_to_the_rates_module(env, monkeypatch):
    import nemori_cli

    saved = {}

    class Rates:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    def save(model_id, rates, cache_dir=None):
        saved.update(model=model_id, rates=rates, cache_dir=cache_dir)
        return cache_dir / "rates.json"

    fake = types.SimpleNamespace(Rates=Rates, save=save)
    monkeypatch.setitem(sys.modules, "nemori_cli.rates", fake)
    monkeypatch.setattr(nemori_cli, "rates", fake, raising=False)
    report = doctor()
    assert saved["model"] == "fake" and saved["cache_dir"] == env / "cache"
    r = saved["rates"]
    ingest = [s for name, s in report.stages.items() if name != "answer"]
    chars = sample.content_chars()
    assert r.prompt_tokens_per_char == pytest.approx(sum(s["prompt_tokens"] for s in ingest) / chars)
    assert r.output_tokens_per_char == pytest.approx(sum(s["output_tokens"] for s in ingest) / chars)
    # Stage seconds are rounded to the millisecond; the rates are not.
    assert r.seconds_per_char == pytest.approx(sum(s["seconds"] for s in ingest) / chars, abs=len(ingest) * 0.0005 / chars)
    assert r.prompt_tps > 0 and r.output_tps > 0 and r.source == "nemori doctor"
    assert report.rates.startswith("saved for fake")


def test_rates_land_where_ingest_dry_run_reads_them(env):
    rates = pytest.importorskip("nemori_cli.rates")
    doctor()
    saved = rates.load("fake", env / "cache")
    assert saved is not None and saved.source == "nemori doctor" and saved.seconds_per_char > 0


def test_throughput_separates_reading_from_writing():
    from nemori_cli.doctor.measure import throughput
    from nemori_cli.domain import CallRecord

    # 1000 prompt tok/s and 50 output tok/s, exactly.
    calls = [CallRecord("s", "m", p, c, (p / 1000 + c / 50) * 1000, 1, "ok") for p, c in [(500, 10), (1000, 40), (200, 100)]]
    speed = throughput(calls)
    assert speed.fitted and speed.prompt_tps == pytest.approx(1000, rel=1e-3) and speed.output_tps == pytest.approx(50, rel=1e-3)


# -- the command ---------------------------------------------------------------


def cli(monkeypatch, capsys, *args: str, answer=sensible) -> tuple[int, str, str]:
    from nemori_cli.cli.app import main

    build_llm, build_embedder = fakes(answer)
    monkeypatch.setattr(deps, "build_llm", build_llm)
    monkeypatch.setattr(deps, "build_embedder", build_embedder)
    monkeypatch.setattr(sys, "argv", ["nemori", "doctor", *args])
    with pytest.raises(SystemExit) as done:
        main()
    out, err = capsys.readouterr()
    return done.value.code, out, err


def test_json_output_has_the_documented_shape(env, monkeypatch, capsys):
    code, out, _ = cli(monkeypatch, capsys, "--model", "fake", "--json")
    data = json.loads(out)
    assert code == 0
    assert {"checks", "stages", "overall", "verdict", "advice"} <= set(data)
    assert all({"name", "ok", "detail"} <= set(c) for c in data["checks"])
    assert set(data["stages"]["narration"]) >= {
        "calls",
        "valid_first_attempt",
        "retries",
        "failed",
        "fallbacks",
        "repairs",
        "prompt_tokens",
        "output_tokens",
        "seconds",
        "tokens_per_s",
        "output_tokens_per_s",
    }
    assert {"schema_valid_rate", "fallback_rate", "seconds_per_100_messages"} <= set(data["overall"])
    assert data["verdict"] == verdict.FIT


def test_text_output_names_checks_stages_and_verdict(env, monkeypatch, capsys):
    code, out, _ = cli(monkeypatch, capsys, "--model", "fake")
    assert code == 0
    assert "ok   python" in out and "partition" in out and "per 100 messages" in out
    assert "fake: fit for ingesting" in out


def test_an_unreachable_endpoint_is_a_fail_line_and_exit_1(env, monkeypatch, capsys):
    code, out, err = cli(monkeypatch, capsys, "--model", "dead", "--no-probe")
    assert code == 1
    line = next(line for line in out.splitlines() if "endpoint" in line)
    assert line.startswith("FAIL") and "http://127.0.0.1:9/v1" in line
    assert "Traceback" not in out + err
    assert "not fit" in out


def test_an_unreachable_endpoint_in_json(env, monkeypatch, capsys):
    code, out, _ = cli(monkeypatch, capsys, "--model", "dead", "--json")
    data = json.loads(out)
    assert code == 1 and data["verdict"] == verdict.NOT_FIT and data["stages"] == {}
    failed = [c for c in data["checks"] if not c["ok"]]
    assert [c["name"] for c in failed] == ["endpoint"] and "127.0.0.1:9" in failed[0]["detail"]


def test_an_unknown_model_is_a_fail_line_not_a_crash(env, monkeypatch, capsys):
    code, out, _ = cli(monkeypatch, capsys, "--model", "nope", "--no-probe")
    assert code == 1 and "FAIL model preset" in out and "unknown model 'nope'" in out
