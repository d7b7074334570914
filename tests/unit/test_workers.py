"""`ingest --workers N`: N requests in flight to an endpoint, the same episodes as one at a time.

A real HTTP endpoint on 127.0.0.1 (tests/support/slow_server.py) answers
nemori's prompts after a fixed latency and counts the requests in flight; the
embedder is the fake one. Nothing here asserts on time: only on what was in
flight at once and on what was written.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime, timedelta

import apsw
import pytest

from nemori_cli import deps
from nemori_cli.api import Memory, ingest_users
from nemori_cli.cli import app as cli_app
from nemori_cli.embed.fake import FakeEmbedder
from nemori_cli.errors import ConfigError, ModelError
from nemori_cli.llm import openai_compat
from tests.support.slow_server import TOPICS, SlowServer
from tests.unit.fake_ingest import isolate, write_jsonl

DELAY = 0.004  # seconds per answer, in runs that count nothing in flight
COUNTED = 0.04  # in runs that do: long enough for requests sent together to overlap on a busy machine


def chat(user: int = 0, topics: int = 6, per_topic: int = 6) -> list[dict]:
    """JSON Lines records: ``per_topic`` messages a topic, two topics a day (the second one cut by the model).

    Each user talks about four topics of its own, then comes back to them (an episode continues an earlier one).
    """
    start = datetime(2023, 5, 8, 10, 0)
    rows = []
    for k in range(topics):
        topic = TOPICS[(user * 5 + k % 4) % len(TOPICS)]
        for i in range(per_topic):
            at = start + timedelta(days=k // 2, minutes=k * 10 + i)
            rows.append(
                {
                    "id": f"u{user}-{k}-{i}",
                    "speaker": "Ann" if i % 2 == 0 else "Bob",
                    "content": f"Let us talk about the {topic}, point {i}.",
                    "timestamp": at.isoformat(),
                }
            )
    return rows


def written(path, user: str | None = None) -> dict:
    """What a database holds, with row ids replaced by their rank among the user's rows, so two runs compare."""
    conn = apsw.Connection(str(path))
    users = [user] if user else [r[0] for r in conn.execute("SELECT DISTINCT user_id FROM messages ORDER BY user_id")]
    out = {}
    for u in users:
        rank = {f"E{r[0]}": f"E#{i}" for i, r in enumerate(conn.execute("SELECT id FROM episodes WHERE user_id = ? ORDER BY id", (u,)))}
        rank |= {f"F{r[0]}": f"F#{i}" for i, r in enumerate(conn.execute("SELECT id FROM facts WHERE user_id = ? ORDER BY id", (u,)))}

        def plain(text, rank=rank):
            return re.sub(r"\b[EF]\d+\b", lambda m: rank.get(m.group(0), m.group(0)), text or "")

        out[u] = {
            "episodes": [
                r for r in conn.execute("SELECT title, narrative, status, boundary FROM episodes WHERE user_id = ? ORDER BY id", (u,))
            ],
            "titles": [r for r in conn.execute("SELECT title, narrative, status FROM episodes WHERE user_id = ? ORDER BY id", (u,))],
            "grouping": [
                (r[0], rank.get(f"E{r[1]}"))
                for r in conn.execute("SELECT msg_key, episode_id FROM messages WHERE user_id = ? ORDER BY ts_epoch, id", (u,))
            ],
            "facts": [(r[0], r[1]) for r in conn.execute("SELECT text, status FROM facts WHERE user_id = ? ORDER BY id", (u,))],
            "events": [
                (r[0], r[1], plain(r[2]))
                for r in conn.execute("SELECT stage, kind, detail FROM stage_events WHERE user_id = ? ORDER BY id", (u,))
            ],
            "calls": [r for r in conn.execute("SELECT stage, attempts, outcome FROM llm_calls WHERE user_id = ? ORDER BY id", (u,))],
        }
    conn.close()
    return out


def written_in_order(path, user: str) -> bool:
    """Each episode written after the one before it in the conversation: the episodes' starts rise with their ids (a merge aside, which restarts earlier)."""
    conn = apsw.Connection(str(path))
    starts = [
        r[0] for r in conn.execute("SELECT start_epoch FROM episodes WHERE user_id = ? AND boundary != 'merged' ORDER BY id", (user,))
    ]
    conn.close()
    return bool(starts) and starts == sorted(starts)


@pytest.fixture
def endpoint(monkeypatch, tmp_path):
    """A slow endpoint, a preset `slow` for it, the fake embedder; every LLM built is new, as in a new process."""
    isolate(monkeypatch, tmp_path)
    monkeypatch.setattr(deps, "build_embedder", lambda settings, db=None: FakeEmbedder())
    monkeypatch.setattr(deps, "check_embedder_files", lambda settings: None)
    monkeypatch.setattr(deps, "_backends", {})
    openai_compat._working_format.clear()
    with SlowServer(DELAY) as server:
        presets = tmp_path / "models.toml"
        presets.write_text(
            f'[llm.slow]\nkind = "openai"\nbase_url = "{server.url}"\nmodel = "slow-model"\ntimeout = 10\nconnect_timeout = 5\n'
        )
        monkeypatch.setenv("NEMORI_MODELS_FILE", str(presets))
        monkeypatch.setenv("NEMORI_MODEL", "slow")
        monkeypatch.delenv("NEMORI_WORKERS", raising=False)
        yield server


def nemori(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """`nemori` through its real entry point in this process: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["nemori", *map(str, args)])
    monkeypatch.setattr(deps, "_backends", {})
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        cli_app.main()
    out = capsys.readouterr()
    return done.value.code or 0, out.out, out.err


# -- one user, from the command line ------------------------------------------


@pytest.mark.parametrize("partition", ["similarity", "model"])
def test_workers_keep_n_requests_in_flight_and_write_the_same_memory(endpoint, monkeypatch, capsys, tmp_path, partition):
    source = write_jsonl(tmp_path / "chat.jsonl", chat())
    code, out, err = nemori(monkeypatch, capsys, "ingest", source, "--db", tmp_path / "one.db", "--json", "--partition", partition)
    assert code == 0 and err == "", err
    alone = json.loads(out)
    assert endpoint.most == 1

    endpoint.reset()
    endpoint.delay = COUNTED
    code, out, err = nemori(
        monkeypatch, capsys, "ingest", source, "--db", tmp_path / "four.db", "--json", "--partition", partition, "--workers", "4"
    )
    assert code == 0 and err == "", err
    together = json.loads(out)
    if partition == "similarity":  # every window is cut at once: the narrations wait for the workers, four at a time
        assert endpoint.most == 4
        assert endpoint.most_after >= 2  # a fact's consolidation questions went together (StructuredLLM.complete_together)
    else:  # each window's cut waits for the one before: a window's narrations go together, beside the writer's calls
        assert 2 <= endpoint.most <= 4
    for key in ("episodes", "merged", "facts", "windows", "pending", "llm_calls", "llm_failed", "fallbacks", "tokens_used"):
        assert together[key] == alone[key], key
    assert alone["episodes"] >= 4 and alone["merged"] >= 1 and alone["facts"] >= 4  # integration, prediction, consolidation all ran
    assert written(tmp_path / "four.db") == written(tmp_path / "one.db")  # every episode, message, fact, decision and call
    assert written_in_order(tmp_path / "four.db", "default")


def test_flush_takes_workers_and_nemori_workers(endpoint, monkeypatch, capsys, tmp_path):
    source = write_jsonl(tmp_path / "chat.jsonl", chat())
    for name in ("one.db", "three.db"):  # the first episode made, the rest pending
        code, _, err = nemori(
            monkeypatch, capsys, "ingest", source, "--db", tmp_path / name, "--max-tokens", "1", "--partition", "similarity"
        )
        assert code == 0, err
    code, _, err = nemori(monkeypatch, capsys, "flush", "--db", tmp_path / "one.db")
    assert code == 0, err
    endpoint.reset()
    endpoint.delay = COUNTED
    monkeypatch.setenv("NEMORI_WORKERS", "3")
    code, out, err = nemori(monkeypatch, capsys, "flush", "--db", tmp_path / "three.db", "--json")
    assert code == 0 and err == "", err
    assert json.loads(out)["pending"] == 0 and endpoint.most == 3
    assert written(tmp_path / "three.db") == written(tmp_path / "one.db")


def test_a_token_budget_stops_where_it_stops_without_workers(endpoint, monkeypatch, capsys, tmp_path):
    source = write_jsonl(tmp_path / "chat.jsonl", chat())
    reports = []
    for name, workers in (("one.db", "1"), ("four.db", "4")):
        code, out, err = nemori(
            monkeypatch, capsys, "ingest", source, "--db", tmp_path / name, "--json", "--max-tokens", "900", "--workers", workers
        )
        assert code == 0, err
        reports.append({k: v for k, v in json.loads(out).items() if k != "seconds"})
    assert reports[0] == reports[1] and reports[0]["stopped_by_budget"] and reports[0]["pending"] > 0
    assert written(tmp_path / "four.db") == written(tmp_path / "one.db")


def test_an_endpoint_lost_mid_run_leaves_whole_episodes_and_the_rest_pending(endpoint, monkeypatch, capsys, tmp_path):
    source = write_jsonl(tmp_path / "chat.jsonl", chat())
    code, _, err = nemori(monkeypatch, capsys, "ingest", source, "--db", tmp_path / "clean.db")
    assert code == 0, err

    endpoint.fail_word = "10 May 2023"  # the last day's prompts get HTTP 404: an unusable endpoint, met ahead of the writer
    code, out, err = nemori(monkeypatch, capsys, "ingest", source, "--db", tmp_path / "cut.db", "--workers", "4")
    assert code == 3 and out == ""
    assert err.count("\n") == 1 and "HTTP 404" in err and "messages are pending and nothing is lost" in err, err
    conn = apsw.Connection(str(tmp_path / "cut.db"))
    pending = conn.execute("SELECT count(*) FROM messages WHERE episode_id IS NULL").fetchall()[0][0]
    dangling = conn.execute(
        "SELECT count(*) FROM messages m WHERE m.episode_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM episodes e WHERE e.id = m.episode_id)"
    )
    empty = conn.execute("SELECT count(*) FROM episodes e WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.episode_id = e.id)")
    assert 0 < pending < len(chat()) and dangling.fetchall()[0][0] == 0 and empty.fetchall()[0][0] == 0
    failed = conn.execute("SELECT count(*) FROM llm_calls WHERE outcome = 'failed'").fetchall()[0][0]
    conn.close()
    assert failed >= 1  # the fault is counted in `nemori stats`

    endpoint.fail_word = None
    code, out, err = nemori(monkeypatch, capsys, "flush", "--db", tmp_path / "cut.db", "--json", "--workers", "4")
    assert code == 0 and json.loads(out)["pending"] == 0, err
    resumed, clean = written(tmp_path / "cut.db")["default"], written(tmp_path / "clean.db")["default"]
    for key in ("titles", "grouping", "facts"):
        assert resumed[key] == clean[key], key


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--workers", "0"], None, "Invalid value for '--workers'"),
        (["--workers", "-2"], None, "Invalid value for '--workers'"),
        (["--workers", "two"], None, "Invalid value for '--workers'"),
        (["--workers", "65"], None, "Invalid value for '--workers'"),
        ([], "0", "NEMORI_WORKERS='0': expected a positive whole number from 1 to 64"),
        ([], "4.5", "NEMORI_WORKERS='4.5': expected a positive whole number from 1 to 64"),
        (["--workers", "4", "--model", "small"], None, "4 workers (--workers / NEMORI_WORKERS) need an OpenAI-compatible endpoint"),
    ],
)
def test_workers_that_cannot_be_are_one_line_and_write_nothing(endpoint, monkeypatch, capsys, tmp_path, args, env, said):
    source = write_jsonl(tmp_path / "chat.jsonl", chat(topics=2))
    if env is not None:
        monkeypatch.setenv("NEMORI_WORKERS", env)
    loaded = []
    monkeypatch.setattr(deps, "build_backend", lambda *a, **k: loaded.append(a))  # a local model must never load
    commands = (["ingest", source], ["flush"], ["ingest", source, "--dry-run"]) if "--model" in args else (["ingest", source],)
    for command in commands:
        code, out, err = nemori(monkeypatch, capsys, *command, "--db", tmp_path / "never.db", *args)
        assert code == 2 and out == "" and err.count("\n") == 1 and said in err, err
    assert not (tmp_path / "never.db").exists() and not loaded and endpoint.served == 0


def test_the_api_takes_workers_and_refuses_them_for_a_local_model(endpoint, tmp_path):
    with pytest.raises(ConfigError, match="workers must be a whole number from 1 to 64, not 0"):
        Memory(tmp_path / "m.db", workers=0)
    with pytest.raises(ConfigError, match="need an OpenAI-compatible endpoint"):
        Memory(tmp_path / "m.db", model="small", workers=2).ingest(chat(topics=2))
    assert not (tmp_path / "m.db").exists()
    endpoint.delay = COUNTED
    with Memory(tmp_path / "m.db", partition="similarity", workers=4) as memory:
        result = memory.ingest(chat())
    assert result.pending == 0 and result.episodes >= 4 and endpoint.most == 4


# -- several users at once (api.ingest_users) -------------------------------


def test_users_run_at_once_with_the_write_lock_free_while_the_model_answers(endpoint, tmp_path):
    inputs = {f"u{u}": chat(u, topics=3) for u in range(3)}
    one = ingest_users(tmp_path / "one.db", inputs, workers=1)
    assert endpoint.most == 1
    endpoint.reset()
    endpoint.delay = COUNTED
    three = ingest_users(tmp_path / "three.db", inputs, workers=3)
    assert endpoint.most == 3
    # Calls made from inside different users' units of work were in flight together: no unit held
    # SQLite's one write lock while the model answered (llm/inflight.ReplayBackend, which asks one at a time).
    assert endpoint.most_after >= 2
    assert {u: r.episodes for u, r in three.items()} == {u: r.episodes for u, r in one.items()}
    assert all(r.pending == 0 and r.facts > 0 for r in three.values())
    assert written(tmp_path / "three.db") == written(tmp_path / "one.db")
    assert all(written_in_order(tmp_path / "three.db", u) for u in inputs)


def test_on_postgresql_users_units_of_work_overlap_without_replays(endpoint, tmp_path):
    """PostgreSQL locks per user: each user's unit of work keeps its lock through its calls, and the users still overlap."""
    from tests.support.postgres import new_database

    inputs = {f"u{u}": chat(u, topics=3) for u in range(3)}
    one = ingest_users(tmp_path / "one.db", inputs, workers=1)
    endpoint.reset()
    endpoint.delay = COUNTED
    three = ingest_users(new_database(), inputs, workers=3)
    assert endpoint.most == 3 and endpoint.most_after >= 2
    assert {u: (r.episodes, r.facts, r.pending) for u, r in three.items()} == {u: (r.episodes, r.facts, r.pending) for u, r in one.items()}


def test_one_user_s_failure_stops_the_others_and_a_rerun_completes_them(endpoint, tmp_path):
    inputs = {f"u{u}": chat(u, topics=3) for u in range(3)}
    ingest_users(tmp_path / "clean.db", inputs, workers=1)
    endpoint.fail_word = TOPICS[7]  # only u1 talks about it, in its last topic, on its second day
    with pytest.raises(ModelError, match=r"^user u1: endpoint .*HTTP 404.*messages are pending"):
        ingest_users(tmp_path / "cut.db", inputs, workers=3)
    endpoint.fail_word = None
    again = ingest_users(tmp_path / "cut.db", inputs, workers=3)
    assert all(r.pending == 0 for r in again.values()) and again["u1"].added == 0
    resumed, clean = written(tmp_path / "cut.db"), written(tmp_path / "clean.db")
    for u in inputs:  # a window cut again where the run stopped may start an episode that the model cut before
        for key in ("titles", "grouping", "facts"):
            assert resumed[u][key] == clean[u][key], (u, key)


# -- independent questions of one unit of work ---------------------------------


def test_complete_together_sends_at_once_only_where_each_answer_is_the_one_given_alone():
    from pydantic import BaseModel

    from nemori_cli.llm.base import StructuredLLM
    from nemori_cli.llm.fake import FakeBackend
    from nemori_cli.llm.inflight import RequestSlots, SlotBackend
    from nemori_cli.stages import Stage

    class Verdict(BaseModel):
        outdated: bool

    prompts = [[{"role": "user", "content": f"question {i}"}] for i in range(3)]
    alone = FakeBackend(default=lambda messages, schema: {"outdated": messages[-1]["content"].endswith("1")})
    assert not hasattr(alone, "exact_many")  # a batched decoder (llama.cpp --parallel) rounds otherwise: one after another
    one_by_one = StructuredLLM(alone).complete_together(prompts, schema=Verdict, stage=Stage("t", 16))
    slots = RequestSlots(3)
    together = StructuredLLM(SlotBackend(alone, slots)).complete_together(prompts, schema=Verdict, stage=Stage("t", 16))
    assert [a.value.outdated for a in together] == [a.value.outdated for a in one_by_one] == [False, True, False]
    assert slots.most >= 1 and slots.busy == 0


def test_a_unit_of_work_that_asks_more_than_its_runs_allow_gets_its_last_answers_inside_the_lock(endpoint, monkeypatch, tmp_path):
    from nemori_cli.pipeline import runner

    inputs = {f"u{u}": chat(u, topics=2) for u in range(2)}
    ingest_users(tmp_path / "one.db", inputs, workers=1)
    monkeypatch.setattr(runner, "MAX_RUNS", 2)  # one answer fetched outside the lock, the rest asked inside it
    ingest_users(tmp_path / "two.db", inputs, workers=2)
    assert written(tmp_path / "two.db") == written(tmp_path / "one.db")
