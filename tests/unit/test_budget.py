"""`--max-tokens`: a run stops cleanly between episodes once its calls used the budget, and a rerun resumes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from nemori_cli.importers.jsonl import read_jsonl
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import messages as message_sql
from nemori_cli.store.sqlite import SqliteStore
from tests.conftest import REPO
from tests.unit.fake_ingest import answer, conversation, isolate, nemori, use_fakes, write_jsonl

TOPICS = ("kayak", "piano", "garden", "chess")  # four episodes: one topic a day


@pytest.fixture
def env(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    return use_fakes(monkeypatch)


@pytest.fixture
def chat(tmp_path):
    return write_jsonl(tmp_path / "chat.jsonl", conversation(TOPICS))


def _counts(path) -> tuple[int, int, int]:
    db = SqliteStore(path, create=False)
    try:
        calls = db.one("SELECT coalesce(sum(prompt_tokens + completion_tokens), 0) AS t FROM llm_calls")["t"]
        return episode_sql.count(db, "default"), message_sql.count_pending(db, "default"), calls
    finally:
        db.close()


def test_a_tiny_budget_stops_after_one_episode_and_a_rerun_finishes(env, chat, tmp_path):
    path = tmp_path / "budget.db"
    first = nemori("ingest", chat, "--db", path, "--max-tokens", 1, "--json")
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert report["stopped_by_budget"] is True and report["episodes"] == 1 and report["pending"] == 12
    assert report["tokens_used"] > 1
    assert first.stderr == (
        f"nemori: token budget of 1 reached after {report['tokens_used']} tokens; 12 messages pending; "
        "rerun the same command (or `nemori build`) to continue\n"
    )
    episodes, pending, logged = _counts(path)
    assert (episodes, pending) == (1, 12) and logged == report["tokens_used"]  # every counted call was written

    second = nemori("ingest", chat, "--db", path, "--json")
    assert second.exit_code == 0, second.output
    rest = json.loads(second.stdout)
    assert rest["added"] == 0 and rest["stopped_by_budget"] is False and rest["pending"] == 0 and second.stderr == ""

    unbudgeted = tmp_path / "whole.db"
    assert nemori("ingest", chat, "--db", unbudgeted).exit_code == 0
    assert _counts(path)[:2] == _counts(unbudgeted)[:2] == (4, 0)


def test_budgeted_flushes_resume_one_step_at_a_time(env, chat, tmp_path):
    path = tmp_path / "steps.db"
    first = nemori("ingest", chat, "--db", path, "--max-tokens", 1)
    assert first.exit_code == 0 and "token budget of 1 reached" in first.stderr
    runs = 0
    while _counts(path)[1]:
        flushed = nemori("flush", "--db", path, "--max-tokens", 1, "--json")
        assert flushed.exit_code == 0, flushed.output
        assert json.loads(flushed.stdout)["episodes"] >= 1  # every run makes progress
        runs += 1
        assert runs < 10
    assert runs == 3 and _counts(path)[:2] == (4, 0)


def test_a_large_budget_changes_nothing(env, chat, tmp_path):
    result = nemori("ingest", chat, "--db", tmp_path / "big.db", "--max-tokens", 10**9, "--json")
    report = json.loads(result.stdout)
    assert report["stopped_by_budget"] is False and report["episodes"] == 4 and report["pending"] == 0
    assert report["tokens_used"] == _counts(tmp_path / "big.db")[2] and result.stderr == ""


def test_the_pipeline_counts_exactly_the_tokens_it_wrote(db, embedder, tmp_path):
    """Pipeline.process itself: each budgeted run makes one episode, and tokens_used is what the log gained."""
    from nemori_cli.llm.base import StructuredLLM
    from nemori_cli.llm.fake import FakeBackend

    file = write_jsonl(tmp_path / "c.jsonl", conversation(TOPICS))
    with file.open("rb") as f:
        incoming = read_jsonl(f, str(file))
    pipe = Pipeline(db, "u", StructuredLLM(FakeBackend(default=answer)), embedder)
    pipe.add_messages(incoming)
    logged = 0
    for pending in (12, 8, 4):
        report = pipe.process(flush=True, max_tokens=1)
        assert report.stopped_by_budget and report.episodes == 1 and report.pending == pending
        total = db.one("SELECT sum(prompt_tokens + completion_tokens) AS t FROM llm_calls WHERE user_id = 'u'")["t"]
        assert report.tokens_used == total - logged > 0
        logged = total
    last = pipe.process(flush=True, max_tokens=1)  # the last episode: nothing is left, so no stop is reported
    assert not last.stopped_by_budget and last.episodes == 1 and last.pending == 0
    assert episode_sql.count(db, "u") == 4


@pytest.mark.parametrize("value", ["0", "-5"])
def test_a_budget_must_be_positive(tmp_path, value):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEMORI_")}
    code = "import sys; from nemori_cli.cli.app import main; sys.argv = ['nemori', *sys.argv[1:]]; main()"
    for command in (["ingest", str(REPO / "examples" / "chat.jsonl")], ["flush"]):
        run = subprocess.run(
            [sys.executable, "-c", code, *command, "--db", str(tmp_path / "x.db"), "--max-tokens", value],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
        assert run.returncode == 2, run.stderr
        assert run.stderr == f"nemori: error: --max-tokens must be a positive number of tokens, not {value}\n"
    assert not (tmp_path / "x.db").exists()
