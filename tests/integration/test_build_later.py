"""Searchable first, built behind, with the real stack: llama.cpp (tiny), sentence-transformers, SQLite, a detached worker.

`ingest --build later` stores and indexes with no LLM; `ask` answers from raw
turns at once and says they are not built; `build --background` builds the
same episodes as a one-pass ingest; a worker killed with SIGKILL loses
nothing and, resumed, cuts the same episodes.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import apsw
import pytest

from tests.integration.conftest import EXAMPLE, run_json, run_nemori

pytestmark = pytest.mark.integration


def _groups(db: Path) -> list[tuple[str, str]]:
    """Each live episode's boundary and messages, read with plain SQL."""
    conn = apsw.Connection(str(db))
    rows = conn.execute(
        "SELECT e.boundary, (SELECT group_concat(m.msg_key, ' ') FROM messages m WHERE m.episode_id = e.id) "
        "FROM episodes e WHERE e.status = 'active' ORDER BY e.start_ts"
    ).fetchall()
    conn.close()
    return [tuple(r) for r in rows]


def _episodes_so_far(db: Path) -> int:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute("SELECT count(*) FROM episodes").fetchall()[0][0]
    finally:
        conn.close()


def _gone(pid: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise AssertionError(f"the background build {pid} did not end")


def test_stored_then_answered_at_once_then_built_behind_as_a_one_pass_ingest_builds(tmp_path):
    one_pass, later = tmp_path / "one.db", tmp_path / "later.db"
    whole = run_json("ingest", str(EXAMPLE), "--db", str(one_pass), "--build", "now")
    assert whole["episodes"] >= 3 and whole["pending"] == 0

    stored = run_json("ingest", str(EXAMPLE), "--db", str(later), "--build", "later")
    assert (stored["build"], stored["added"], stored["episodes"], stored["built"]["pending"]) == ("later", 30, 0, 30)
    found = run_json("search", "Northwind offer", "--db", str(later))
    assert any("Northwind" in h["text"] for h in found["hits"])  # raw turns, searchable before any LLM call

    asked = run_json("ask", "What did Sam decide about the Northwind job offer?", "--db", str(later))
    assert not asked["failed"] and asked["built"]["pending"] == 30 and asked["unbuilt_memories"] > 0
    assert asked["core"]["outcome"] == "built"  # the whole history fits: its core is read, cold or not
    text = run_nemori("ask", "What did Sam decide about the Northwind job offer?", "--db", str(later))
    assert text.returncode == 0 and "not built into episodes and facts yet" in text.stdout.decode()

    started = run_json("build", "--background", "--db", str(later))
    assert started["background"] and started["pid"] and Path(started["log"]).exists()
    _gone(started["pid"])
    stats = run_json("stats", "--db", str(later))
    assert stats["built"]["pending"] == 0 and stats["built"]["building"] is False
    assert stats["counts"]["episodes"] == whole["episodes"]
    assert _groups(later) == _groups(one_pass)


def test_a_background_build_killed_with_sigkill_resumes_to_the_same_episodes(tmp_path):
    reference, killed = tmp_path / "reference.db", tmp_path / "killed.db"
    for db in (reference, killed):
        run_json("ingest", str(EXAMPLE), "--db", str(db), "--build", "later")
    assert run_nemori("build", "--db", str(reference), "--quiet").returncode == 0

    pid = run_json("build", "--background", "--db", str(killed))["pid"]
    deadline = time.monotonic() + 300
    while _episodes_so_far(killed) == 0 and time.monotonic() < deadline:  # killed once it is part way
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)
    _gone(pid)
    state = run_json("stats", "--db", str(killed))["built"]
    assert state["building"] is False  # the kernel dropped the dead worker's lock
    assert 0 < state["pending"] < 30 and state["built_through"] is not None

    resumed = run_nemori("build", "--db", str(killed), "--quiet")
    assert resumed.returncode == 0 and b"Traceback" not in resumed.stderr
    conn = apsw.Connection(str(killed))
    one = lambda sql: conn.execute(sql).fetchall()[0][0]  # noqa: E731
    assert one("SELECT count(*) FROM messages") == one("SELECT count(DISTINCT msg_key) FROM messages") == 30
    assert one("SELECT count(*) FROM messages WHERE episode_id IS NULL") == 0
    conn.close()
    assert _groups(killed) == _groups(reference)


def test_build_stop_ends_a_background_build_between_two_episodes(tmp_path):
    db = tmp_path / "m.db"
    run_json("ingest", str(EXAMPLE), "--db", str(db), "--build", "later")
    pid = run_json("build", "--background", "--db", str(db))["pid"]
    deadline = time.monotonic() + 300
    while _episodes_so_far(db) == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    stopped = run_json("build", "--stop", "--db", str(db))
    assert stopped["stopped"] is True and stopped["pid"] == pid
    _gone(pid, timeout=10)
    state = run_json("stats", "--db", str(db))["built"]
    assert state["building"] is False and state["pending"] > 0  # stopped part way; the rest is pending
    assert run_json("build", "--db", str(db))["pending"] == 0


def test_beyond_the_window_an_unbuilt_memory_answers_without_reading_its_core(tmp_path):
    """A core no build has read is not read for one question beyond the window (core_answer.COLD_CORE_TOKENS)."""
    import json
    from datetime import datetime, timedelta

    start = datetime(2024, 1, 1, 9, 0)
    chat = tmp_path / "long.jsonl"
    lines = [
        {
            "id": f"m{i}",
            "speaker": "Ann" if i % 2 else "Bob",
            "content": f"Day {i}: we walked the dog along the river and planned the garden, bed number {i}.",
            "timestamp": (start + timedelta(hours=6 * i)).isoformat(),
        }
        for i in range(400)  # about 12,000 tokens: three times tiny's 4,096-token window
    ]
    lines.append(
        {"id": "boat", "speaker": "Ann", "content": "My boat is called Heron.", "timestamp": (start - timedelta(days=9)).isoformat()}
    )
    chat.write_text("".join(json.dumps(line) + "\n" for line in lines))
    db = tmp_path / "long.db"
    run_json("ingest", str(chat), "--db", str(db), "--build", "later")
    asked = run_json("ask", "What is Ann's boat called?", "--db", str(db))
    assert not asked["failed"] and asked["core"] is None  # no core read, none saved
    saved = list((tmp_path / "long.db.kv").glob("*.kv"))
    assert [p.name.endswith("-head.kv") for p in saved] == [True]  # only the short road's instructions
    assert any("Heron" in m["text"] for m in asked["memories"])  # the question's own retrieval found the old turn

    # The next process loads the instructions' state instead of reading them, and answers as the one that saved it.
    stamp = saved[0].stat().st_mtime_ns
    again = run_json("ask", "What is Ann's boat called?", "--db", str(db))
    assert again["answer"] == asked["answer"] and saved[0].stat().st_mtime_ns == stamp
    # A past moment and the budget road open their prompts with the same instructions: the same file serves them.
    for how in (["--as-of", "2024-12-31"], ["--profile", "budget"]):
        other = run_json("ask", "What is Ann's boat called?", "--db", str(db), *how)
        assert not other["failed"] and other["core"] is None, how
        assert sorted((tmp_path / "long.db.kv").glob("*.kv")) == saved and saved[0].stat().st_mtime_ns == stamp, how
