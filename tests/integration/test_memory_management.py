"""Memory management with the real stack: consolidation, integration and the method profile.

The Paris→Berlin test runs on the `base` preset (Qwen2.5-Coder-1.5B): the
0.5B default fails the outdated-fact self-check, so it never retires a fact
(see docs/CONSOLIDATION.md). The other tests use the tiny model.
"""

from __future__ import annotations

import pytest

from nemori_cli.store.sqlite import SqliteStore
from tests.integration.conftest import REPO, run_json, run_nemori

pytestmark = pytest.mark.integration

DATA = REPO / "tests" / "data"


def test_a_move_supersedes_the_old_home_and_ask_uses_the_new_one(tmp_path):
    db = str(tmp_path / "lea.db")
    report = run_json("ingest", str(DATA / "paris_berlin.jsonl"), "--db", db, "--user", "lea", "--model", "base")
    assert report["episodes"] == 2
    facts = run_json("inspect", "facts", "--all", "--db", db, "--user", "lea")["facts"]
    by_id = {f["id"]: f for f in facts}
    berlin = [f for f in facts if "Berlin" in f["text"] and f["status"] == "active"]
    paris = [f for f in facts if "Paris" in f["text"] and "live" in f["text"]]
    assert berlin and paris, facts
    assert all(f["status"] == "superseded" for f in paris), facts
    assert all("outdated by F" in f["superseded_reason"] and "Berlin" in f["superseded_reason"] for f in paris)
    for f in paris:  # what replaced it is current and says Berlin
        successor = by_id[f["superseded_by"]]
        assert successor["status"] == "active" and "Berlin" in successor["text"], successor
    history = run_json("inspect", "fact", str(paris[0]["superseded_by"]), "--db", db, "--user", "lea")
    assert paris[0]["id"] in [r["id"] for r in history["replaced"]]
    answer = run_json("ask", "Where does Lea live?", "--db", db, "--user", "lea", "--model", "base")
    assert "Berlin" in answer["answer"], answer["answer"]
    memories = [m["text"] for m in answer["memories"] if m["kind"] == "fact"]
    assert not any("Paris" in m and "live" in m for m in memories)  # superseded facts are not retrieved
    stats = run_json("stats", "--db", db, "--user", "lea")
    stage = {s["stage"]: s for s in stats["stages"]}
    assert stage["consolidation"]["decisions"] >= 1 and stage["consolidation"]["calls"] >= 3


def test_integration_decisions_are_logged_and_a_merge_keeps_provenance(tmp_path):
    db = tmp_path / "hike.db"
    run_json("ingest", str(DATA / "continuation.jsonl"), "--db", str(db), "--no-facts")
    store = SqliteStore(db, create=False)
    decisions = store.query("SELECT detail FROM stage_events WHERE stage = 'integration' AND kind IN ('decision', 'fallback')")
    assert decisions, "the second part was similar and recent: the model must have been asked"
    merged = store.query("SELECT id, superseded_by FROM episodes WHERE status = 'superseded'")
    live = store.query("SELECT id FROM episodes WHERE status = 'active'")
    owned = store.one("SELECT count(DISTINCT episode_id) AS n FROM messages")["n"]
    assert owned == len(live)  # every message belongs to a live episode, merged or not
    for row in merged:
        assert row["superseded_by"] in {r["id"] for r in live}
        shown = run_json("inspect", "episode", str(row["superseded_by"]), "--db", str(db))
        assert row["id"] in [p["id"] for p in shown["merged_from"]]


def test_summary_mode_is_recorded_and_a_mixed_run_is_refused_without_a_write(tmp_path):
    db = tmp_path / "summary.db"
    lines = (DATA / "paris_berlin.jsonl").read_text().splitlines()
    first = tmp_path / "first.jsonl"
    first.write_text("\n".join(lines[:4]) + "\n")
    run_json("ingest", str(first), "--db", str(db), "--user", "lea", "--memory", "summary")
    summary = run_json("inspect", "summary", "--db", str(db), "--user", "lea")["summaries"]
    assert len(summary) == 1 and summary[0]["text"]
    stats = run_json("stats", "--db", str(db), "--user", "lea")
    assert stats["counts"]["facts"] == 0 and stats["profile"].startswith("--memory summary")
    before = db.read_bytes()
    proc = run_nemori("ingest", str(DATA / "paris_berlin.jsonl"), "--db", str(db), "--user", "lea", "--memory", "native")
    assert proc.returncode == 2
    err = proc.stderr.decode().strip().splitlines()
    assert len(err) == 1 and "--memory summary" in err[0] and "--memory native" in err[0]
    assert db.read_bytes() == before
