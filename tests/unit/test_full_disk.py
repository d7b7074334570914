"""A full disk, and a database whose folder vanishes: one line each, and the file whole afterwards.

A full disk is played by a file-size limit (RLIMIT_FSIZE, set in the child
before it starts) with SIGXFSZ ignored: a write past it fails with EFBIG and
SQLite reports a disk I/O error (SQLITE_IOERR_WRITE; a real full disk's
ENOSPC is SQLITE_FULL). The child (tests/support/full_disk.py) runs the
store's own unit of work, or the real `nemori` entry point with the fake
model and embedder. Afterwards the file opens, integrity_check is ok, every
unit of work in it is whole, and the same command, once there is room,
resumes.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import shutil
import subprocess
import sys
from datetime import datetime, timedelta

import pytest

from nemori_cli.embed.fake import FakeEmbedder
from nemori_cli.errors import StoreError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.llm.fake import FakeBackend
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.store import messages as message_sql
from nemori_cli.store.sqlite import SqliteStore
from tests.conftest import REPO, make_messages
from tests.support import full_disk
from tests.unit.fake_ingest import isolate, use_fakes, write_jsonl
from tests.unit.fake_ingest import nemori as nemori_in_process
from tests.unit.isolation_world import MARKERS, TOPICS, echo, half_made, messages_for

pytestmark = pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="no file-size limit on this system")

UNLIMITED = resource.RLIM_INFINITY
ROLLED_BACK = "this unit of work was rolled back: free space and rerun to resume"


def child(tmp_path, what: str, *args: str, limit: int) -> subprocess.CompletedProcess:
    """tests/support/full_disk.py in a process of its own, no file of which may grow past ``limit`` bytes."""

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {k: v for k, v in os.environ.items() if not k.startswith("NEMORI_")}
    env.update(PYTHONPATH=str(REPO), NEMORI_CACHE_DIR=str(tmp_path / "cache"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    return subprocess.run(
        [sys.executable, "-m", "tests.support.full_disk", what, *args],
        preexec_fn=limited,
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )


def one_line(run: subprocess.CompletedProcess) -> str:
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    return lines[0]


def whole(path) -> SqliteStore:
    """The file after the failure: it opens, SQLite finds it sound, and no unit of work in it is cut in two."""
    db = SqliteStore(path, create=False)
    assert db.one("PRAGMA integrity_check")["integrity_check"] == "ok"
    assert db.query("PRAGMA foreign_key_check") == []
    assert half_made(db) == []
    return db


def test_what_sqlite_raises_at_the_file_size_limit(tmp_path):
    """The finding the mapping in db.py rests on: EFBIG is SQLITE_IOERR_WRITE (not SQLITE_FULL), and SQLite has rolled back by itself."""
    run = child(tmp_path, "raw", str(tmp_path / "raw.db"), limit=400_000)
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout)
    assert found["committed"] >= 1 and found["rolled_back"]
    assert (found["type"], found["code"], found["errno"]) == ("IOError", "SQLITE_IOERR_WRITE", errno.EFBIG) or found["type"] == "FullError"


def test_a_unit_of_work_at_the_limit_is_one_line_and_leaves_the_batches_before_it(tmp_path):
    path = tmp_path / "memory.db"
    run = child(tmp_path, "store", str(path), limit=1_200_000)
    assert run.returncode == 0, run.stderr
    said = [json.loads(line) for line in run.stdout.splitlines()]
    committed = [s["committed"] for s in said if "committed" in s]
    (error,) = [s["error"] for s in said if "error" in s]
    assert committed == list(range(len(committed))) and len(committed) >= 2  # some batches went in before the disk was full
    assert error.startswith(f"writing {path} failed (File too large, SQLITE_IOERR_WRITE)") and error.endswith(ROLLED_BACK)
    db = whole(path)
    stored = {
        n: db.one("SELECT count(*) AS n FROM messages WHERE content LIKE ?", (f"batch{n} %",))["n"] for n in range(len(committed) + 1)
    }
    assert stored == {**{n: full_disk.BATCH for n in committed}, len(committed): 0}  # every batch whole, the failed one absent
    # Room again: the batch that failed goes in, as one more unit of work.
    pipe = Pipeline(db, "alice", StructuredLLM(FakeBackend()), FakeEmbedder(full_disk.DIMENSIONS))
    assert pipe.add_messages(full_disk.batch(len(committed))) == full_disk.BATCH
    assert half_made(db) == []
    db.close()


def test_sqlite_full_is_one_line_too_and_the_rows_before_it_stay(tmp_path):
    """SQLITE_FULL (a real disk's ENOSPC) played by SQLite itself: a page limit on the connection."""
    path = tmp_path / "memory.db"
    db = SqliteStore(path)
    pipe = Pipeline(db, "alice", StructuredLLM(FakeBackend()), FakeEmbedder(full_disk.DIMENSIONS))
    pipe.add_messages(full_disk.batch(0))
    pages = db.one("PRAGMA page_count")["page_count"]
    db.one(f"PRAGMA max_page_count = {pages + 8}")
    with pytest.raises(StoreError, match=f"the disk holding {path} is full; {ROLLED_BACK}"):
        pipe.add_messages(full_disk.batch(1))
    assert not db.conn.in_transaction
    db.one("PRAGMA max_page_count = 4294967294")  # room again
    assert pipe.add_messages(full_disk.batch(1)) == full_disk.BATCH
    db.close()
    db = whole(path)
    assert db.one("SELECT count(*) AS n FROM messages")["n"] == 2 * full_disk.BATCH
    db.close()


def _chat(path, n: int, first: int, words: int = 80):
    start = datetime(2023, 5, 1, 9)
    rows = [
        {
            "id": f"m{first + i}",
            "speaker": "Ann" if i % 2 == 0 else "Bob",
            "timestamp": (start + timedelta(hours=first + i)).isoformat(),
            "content": f"{TOPICS[i % 4]} " + " ".join(f"w{first + i}x{j}" for j in range(words)),
        }
        for i in range(n)
    ]
    return write_jsonl(path, rows)


def test_ingest_on_a_full_disk_is_one_line_keeps_what_it_had_and_resumes(tmp_path):
    path = tmp_path / "memory.db"
    # The big chat's messages must not fit in what the limit leaves: the log file starts empty and may grow
    # to the limit too, so it must need more than the whole small file (which the vector tables' bit copies grew).
    small, big = _chat(tmp_path / "small.jsonl", 8, 0), _chat(tmp_path / "big.jsonl", 600, 100)
    first = child(tmp_path, "cli", "ingest", str(small), "--db", str(path), "--user", "alice", limit=UNLIMITED)
    assert first.returncode == 0, first.stderr
    size = max(p.stat().st_size for p in tmp_path.glob("memory.db*"))
    run = child(tmp_path, "cli", "ingest", str(big), "--db", str(path), "--user", "alice", limit=size + 64_000)
    assert run.returncode == 4
    line = one_line(run)
    assert "SQLITE_IOERR_WRITE" in line and line.endswith(ROLLED_BACK), line
    db = whole(path)
    assert db.one("SELECT count(*) AS n FROM messages")["n"] == 8  # all of the file or none of it
    db.close()
    again = child(tmp_path, "cli", "ingest", str(big), "--db", str(path), "--user", "alice", limit=UNLIMITED)
    assert again.returncode == 0, again.stderr
    db = whole(path)
    assert db.one("SELECT count(*) AS n FROM messages")["n"] == 608 and message_sql.count_pending(db, "alice") < 608
    db.close()


def _stored_not_processed(path) -> int:
    """48 messages of alice, 12 days of 4, stored and pending; returns the file's size."""
    db = SqliteStore(path)
    pipe = Pipeline(db, "alice", StructuredLLM(FakeBackend(default=echo)), FakeEmbedder(full_disk.DIMENSIONS))
    pipe.add_messages(
        [
            m
            for day in range(12)
            for m in messages_for(MARKERS[0], TOPICS[day % 4], 4, datetime(2023, 5, 1, 9) + timedelta(days=day), 4 * day)
        ]
    )
    db.close()
    return path.stat().st_size


def test_flush_on_a_full_disk_keeps_whole_episodes_and_resumes(tmp_path):
    seed = tmp_path / "seed.db"
    size = _stored_not_processed(seed)
    outcomes = []
    for margin in (16_000, 128_000, 512_000):  # the disk fills at a different episode each time
        path = tmp_path / f"memory-{margin}.db"
        shutil.copy(seed, path)
        run = child(tmp_path, "cli", "flush", "--db", str(path), "--user", "alice", limit=size + margin)
        db = whole(path)
        done = db.one("SELECT count(*) AS n FROM messages WHERE episode_id IS NOT NULL")["n"]
        db.close()
        outcomes.append((run.returncode, done))
        if run.returncode:
            assert run.returncode == 4
            line = one_line(run)
            assert "SQLITE_IOERR_WRITE" in line and line.endswith(ROLLED_BACK), line
        again = child(tmp_path, "cli", "flush", "--db", str(path), "--user", "alice", limit=UNLIMITED)
        assert again.returncode == 0, again.stderr
        db = whole(path)
        assert message_sql.count_pending(db, "alice") == 0
        db.close()
    assert any(code == 4 and 0 < done < 48 for code, done in outcomes), outcomes  # the disk filled midway, episodes before it kept


# -- the database's folder vanishes ------------------------------------------------


def test_a_folder_gone_between_runs_is_one_line_for_every_command_that_reads(tmp_path):
    folder = tmp_path / "memories"
    db = SqliteStore(folder / "memory.db")
    with db.transaction():
        message_sql.insert_messages(db, "alice", make_messages(3))
    db.close()
    shutil.rmtree(folder)
    path = str(folder / "memory.db")
    for command in (["stats"], ["inspect", "episodes"], ["search", "anything"], ["ask", "anything"], ["flush"], ["forget", "episode", "1"]):
        run = subprocess.run(
            [sys.executable, "-m", "nemori_cli", *command, "--db", path],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={k: v for k, v in os.environ.items() if not k.startswith("NEMORI_")},
            timeout=120,
        )
        assert run.returncode == 4, (command, run.stderr)
        assert f"no database at {path}" in one_line(run)
    assert not folder.exists()  # no read made it again


def test_a_folder_gone_while_the_file_is_open_refuses_the_next_unit_of_work(tmp_path):
    """SQLite in WAL mode writes on into a deleted file without a word, and everything is lost at close."""
    folder = tmp_path / "memories"
    db = SqliteStore(folder / "memory.db")
    with db.transaction():
        message_sql.insert_messages(db, "alice", make_messages(3))
    shutil.rmtree(folder)
    with pytest.raises(StoreError, match=r"was deleted or moved while nemori had it open \(is its folder gone\?\)"), db.transaction():
        message_sql.insert_messages(db, "alice", make_messages(3, topic="lost"))
    db.close()
    # A file put in its place is another file: refused too.
    db = SqliteStore(folder / "memory.db")
    os.replace(db.path, folder / "moved.db")
    shutil.copy(folder / "moved.db", db.path)
    with pytest.raises(StoreError, match="deleted or moved"), db.transaction():
        pass
    db.close()


def test_ingest_whose_folder_vanishes_midway_says_so_in_one_line(tmp_path, monkeypatch):
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    from nemori_cli import deps

    folder = tmp_path / "memories"
    calls = []

    def vanishing(messages, schema):
        calls.append(schema.get("title"))
        if len(calls) == 3 and folder.exists():  # some episodes in, a narrative on its way
            shutil.rmtree(folder)
        return echo(messages, schema)

    monkeypatch.setattr(deps, "build_llm", lambda settings: StructuredLLM(FakeBackend(default=vanishing)))
    chat = _chat(tmp_path / "chat.jsonl", 24, 0, words=5)
    result = nemori_in_process("ingest", chat, "--db", folder / "memory.db", "--user", "alice")
    assert isinstance(result.exception, StoreError) and result.exception.exit_code == 4, result.output
    assert "deleted or moved while nemori had it open" in result.exception.message
