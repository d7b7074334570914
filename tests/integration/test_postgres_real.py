"""`nemori` end to end on a real PostgreSQL server (pgvector) with the real tiny model and real MiniLM.

The server is started by the tests (tests/support/postgres.py); the CLI runs
in a subprocess, as a user runs it, with --db postgresql://...
"""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import EXAMPLE, run_json, run_nemori
from tests.support.postgres import new_database

pytestmark = pytest.mark.integration


def test_the_bundled_example_on_postgresql(tmp_path):
    url = new_database()
    made = run_json("ingest", str(EXAMPLE), "--db", url)
    expected = [json.loads(line)["id"] for line in EXAMPLE.read_text().splitlines()]
    assert made["added"] == len(expected) and made["pending"] == 0

    episodes = run_json("inspect", "episodes", "--db", url)["episodes"]
    ids = [m["source_id"] for e in episodes for m in e["messages"]]
    assert sorted(ids) == sorted(expected) and len(ids) == len(set(ids))  # every message in exactly one episode
    assert len(episodes) >= 3  # three sessions weeks apart are never one episode

    hits = run_json("search", "bouldering gym Granite Works", "--db", url, env={"NEMORI_MODEL": "no-such-model"})["hits"]
    assert hits and hits[0]["similarity"] is not None
    assert any("Granite" in m["content"] for h in hits[:3] for m in h["messages"]) or "limb" in (hits[0]["text"] + hits[0]["title"]).lower()

    answer = run_json("ask", "Which company offered Sam a job?", "--db", url)
    assert answer["answer"].strip()
    stats = run_json("stats", "--db", url)
    assert stats["embedder"] == "all-MiniLM-L6-v2:384" and stats["counts"]["messages"] == len(expected)

    again = run_json("ingest", str(EXAMPLE), "--db", url)
    assert again["added"] == 0 and again["episodes"] == 0

    gone = run_nemori("forget", "user", "default", "--yes", "--db", url)
    assert gone.returncode == 0, gone.stderr.decode()
    assert run_json("stats", "--db", url)["counts"]["messages"] == 0


def test_bench_builds_and_answers_from_memories_on_postgresql(tmp_path):
    from tests.conftest import SHARED_DATA

    locomo = SHARED_DATA / "locomo" / "locomo-dev.json"
    if not locomo.is_file():
        pytest.skip(f"development data not found at {locomo}")
    url = new_database()
    out = tmp_path / "out"
    args = (
        "bench",
        "locomo",
        str(locomo),
        "--sample",
        "conv-26",
        "--sessions",
        "1",
        "--questions",
        "1",
        "--systems",
        "nemori,rag-256",
        "--model",
        "tiny",
        "--out",
        str(out),
        "--db",
        url,
    )
    report = run_json(*args)
    assert report["config"]["store"]["engine"] == "postgresql"
    for system in ("nemori", "rag-256"):
        assert report["systems"][system]["overall"]["questions"] == 1
        assert report["systems"][system]["costs"]["db_bytes"] > 0
    assert report["systems"]["nemori"]["costs"]["llm_calls"] > 0
    assert not (out / "memories").exists()  # the memories are schemas on the server, not files
    lines = (out / "results.jsonl").read_text().splitlines()
    assert run_json(*args)["systems"].keys() == report["systems"].keys()
    assert (out / "results.jsonl").read_text().splitlines() == lines  # a rerun resumes: nothing built or answered again
