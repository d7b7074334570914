"""`nemori` end to end with the real tiny model, real MiniLM and a real SQLite file."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys

import pytest

from tests.integration.conftest import EXAMPLE, REPO, run_json, run_nemori

pytestmark = pytest.mark.integration


def test_every_message_lands_in_exactly_one_episode(ingested_example):
    episodes = run_json("inspect", "episodes", "--db", str(ingested_example))["episodes"]
    ids = [m["source_id"] for e in episodes for m in e["messages"]]
    expected = [json.loads(line)["id"] for line in EXAMPLE.read_text().splitlines()]
    assert sorted(ids) == sorted(expected)
    assert len(ids) == len(set(ids))
    pending = run_json("inspect", "messages", "--pending", "--db", str(ingested_example))["messages"]
    assert pending == []


def test_narratives_carry_absolute_dates_and_episode_times(ingested_example):
    episodes = run_json("inspect", "episodes", "--db", str(ingested_example))["episodes"]
    assert len(episodes) >= 3  # three sessions weeks apart are never one episode
    for e in episodes:
        assert re.search(r"\b20\d\d\b", e["narrative"]), e["narrative"]
        assert e["start"] <= e["end"]
        assert e["message_ids"] == [m["source_id"] for m in e["messages"]]


def test_reingesting_adds_nothing(ingested_example):
    before = run_json("stats", "--db", str(ingested_example))["counts"]
    out = run_json("ingest", str(EXAMPLE), "--db", str(ingested_example))
    assert out["added"] == 0 and out["episodes"] == 0
    assert run_json("stats", "--db", str(ingested_example))["counts"] == before


def test_stats_count_calls_per_stage(ingested_example):
    stats = run_json("stats", "--db", str(ingested_example))
    stages = {s["stage"]: s for s in stats["stages"]}
    assert stages["narration"]["calls"] >= 3
    assert stages["narration"]["prompt_tokens"] > 0 and stages["narration"]["seconds"] > 0
    assert stats["embedder"] == "all-MiniLM-L6-v2:384"


def test_search_needs_no_llm_and_finds_the_gym(ingested_example):
    out = run_json("search", "bouldering gym Granite Works", "--db", str(ingested_example), env={"NEMORI_MODEL": "no-such-model"})
    assert out["hits"], out
    top = out["hits"][0]
    assert {"id", "time", "score", "text", "title", "similarity"} <= top.keys()
    assert any("Granite" in m["content"] for h in out["hits"][:3] for m in h["messages"]) or "limb" in (top["text"] + top["title"]).lower()
    assert out["ms"] > 0


def test_ask_answers_with_memories_tokens_and_timings(ingested_example):
    out = run_json("ask", "Which company offered Sam a job?", "--db", str(ingested_example))
    assert out["answer"].strip()
    assert out["memories"] and out["cited"]
    # Cited are episodes whose memories were read: retrieved themselves, or the owners of retrieved turns.
    behind = {m["id"] for m in out["memories"] if m["kind"] == "episode"} | {
        msg["episode_id"] for m in out["memories"] for msg in m["messages"] if msg["episode_id"]
    }
    assert set(out["cited"]) <= behind
    assert out["tokens"]["prompt"] > 0 and out["ms"]["answer"] > 0
    assert out["abstained"] in (True, False) and out["failed"] is False


def test_questions_on_a_pipe_are_answered_one_at_a_time_by_one_process(ingested_example, tmp_path):
    """A script keeps one `ask --questions -` running: each answer comes back before the next question is written."""
    asked = ("Which company offered Sam a job?", "When did Priya go climbing?")
    with (tmp_path / "stderr.txt").open("wb") as err:  # a file, not a pipe nobody reads: it cannot fill and stall the child
        proc = subprocess.Popen(
            [sys.executable, "-m", "nemori_cli", "ask", "--questions", "-", "--json", "--db", str(ingested_example)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env={**os.environ, "NEMORI_MODEL": "tiny"},
            cwd=REPO,
        )
        assert proc.stdin and proc.stdout
        replies = []
        try:
            for question in asked:
                proc.stdin.write(question.encode() + b"\n")
                proc.stdin.flush()
                ready, _, _ = select.select([proc.stdout], [], [], 300)  # this question's answer, nothing more asked yet
                assert ready, f"no answer in 300 s: {(tmp_path / 'stderr.txt').read_text()[-500:]}"
                replies.append(json.loads(proc.stdout.readline()))
            proc.stdin.close()
            assert proc.wait(timeout=300) == 0, (tmp_path / "stderr.txt").read_text()[-500:]
            rest = proc.stdout.read()
        finally:
            proc.kill()
    assert [r["question"] for r in replies] == list(asked)
    assert all(r["answer"].strip() and r["memories"] and r["failed"] is False for r in replies)
    assert rest == b""  # one line an answer, nothing else


def test_an_exact_figure_reaches_the_answer_as_the_raw_turn(ingested_example):
    out = run_json("search", "how much more does the job pay", "--db", str(ingested_example))
    turns = [h for h in out["hits"] if h["kind"] == "message"]
    assert any("20 percent" in m["content"] for h in turns for m in h["messages"]), out["hits"]
    assert sum(len(h["text"]) for h in out["hits"]) // 4 <= 900  # the budget (~800 tokens), not k = 10 narratives


def test_ask_for_a_user_with_no_memories_says_so_and_cites_nothing(ingested_example):
    out = run_json("ask", "When did Priya go climbing?", "--db", str(ingested_example), "--user", "stranger")
    assert out["abstained"] is True and out["cited"] == [] and out["memories"] == []
    assert out["answer"].startswith("Not mentioned") and out["tokens"]["prompt"] == 0  # no model call at all


def test_the_paper_profile_answers_from_k_episodes_and_facts(ingested_example):
    out = run_json("ask", "Which company offered Sam a job?", "--profile", "paper", "--db", str(ingested_example))
    assert out["answer"].strip() and {m["kind"] for m in out["memories"]} <= {"episode", "fact"}
    assert set(out["cited"]) <= {m["id"] for m in out["memories"] if m["kind"] == "episode"}


def test_an_unknown_answer_model_is_refused_in_one_line_before_loading_anything(ingested_example):
    proc = run_nemori("ask", "Who is Maya?", "--answer-model", "no-such-model", "--db", str(ingested_example))
    assert proc.returncode == 2
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "no-such-model" in lines[0]


def test_users_never_see_each_other(ingested_example):
    out = run_json("search", "job offer", "--db", str(ingested_example), "--user", "stranger")
    assert out["hits"] == []


def test_stdin_ingest_and_flush_later(tmp_path):
    db = tmp_path / "s.db"
    lines = EXAMPLE.read_bytes().splitlines()[:8]
    out = run_json("ingest", "-", "--no-flush", "--db", str(db), stdin=b"\n".join(lines))
    assert out["added"] == 8 and out["pending"] == 8  # fewer than a window: waits
    out = run_json("flush", "--db", str(db))
    assert out["pending"] == 0 and out["episodes"] >= 1


def test_locomo_sample_is_read_directly(tmp_path):
    from tests.conftest import locomo_file

    db = tmp_path / "l.db"
    out = run_json("ingest", str(locomo_file()), "--format", "locomo", "--sample", "conv-26", "--sessions", "1", "--db", str(db))
    assert out["added"] == 18 and out["pending"] == 0
    episode = run_json("inspect", "episodes", "--db", str(db))["episodes"][0]
    assert episode["messages"][0]["source_id"] == "D1:1"
    assert episode["start"].startswith("2023-05-08")


def test_facts_have_provenance_and_reach_search(ingested_example):
    facts = run_json("inspect", "facts", "--db", str(ingested_example))["facts"]
    episode_ids = {e["id"] for e in run_json("inspect", "episodes", "--db", str(ingested_example))["episodes"]}
    for fact in facts:
        assert fact["source_episode_ids"] and set(fact["source_episode_ids"]) <= episode_ids
        assert fact["status"] == "active"
    stats = run_json("stats", "--db", str(ingested_example))
    stages = {s["stage"] for s in stats["stages"]}
    assert "distillation" in stages  # one call per episode, whatever the tiny model answered
    assert stats["counts"]["facts"] == len(facts)
    if facts:
        one = run_json("inspect", "fact", str(facts[0]["id"]), "--db", str(ingested_example))
        assert one["sources"][0]["id"] == facts[0]["source_episode_ids"][0]
        hits = run_json("search", facts[0]["text"], "--db", str(ingested_example))["hits"]
        assert any(h["kind"] == "fact" and h["id"] == facts[0]["id"] for h in hits)
