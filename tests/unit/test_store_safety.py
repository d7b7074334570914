"""The store under concurrent writers, open readers and files that are not nemori's (issue 17).

Real SQLite files and real processes (`python -m nemori_cli`); no model is loaded:
every command here is refused, or runs, before one would be.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time

import apsw
import pytest

from nemori_cli.embed.base import identity
from nemori_cli.errors import StoreError
from nemori_cli.store import messages as message_sql
from nemori_cli.store import sqlite_connection, sqlite_files
from nemori_cli.store.sqlite import SqliteStore
from tests.conftest import REPO, make_messages, sqlite_only


def nemori(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NEMORI_")}
    return subprocess.run(
        [sys.executable, "-m", "nemori_cli", *args], capture_output=True, text=True, cwd=REPO, env={**clean, **(env or {})}, timeout=120
    )


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_clear_line(run: subprocess.CompletedProcess) -> str:
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    return lines[0]


# -- another application's file, an empty file ------------------------------


@pytest.fixture
def foreign(tmp_path):
    path = tmp_path / "other-app.db"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE invoices(id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices(total) VALUES (9.5)")
    conn.close()
    return path


@pytest.mark.parametrize(
    "command", [["stats"], ["inspect", "episodes"], ["search", "anything"], ["ask", "anything"], ["forget", "user", "u", "--yes"]]
)
def test_no_command_touches_another_applications_sqlite_file(foreign, command):
    before = digest(foreign)
    run = nemori(*command, "--db", str(foreign))
    assert run.returncode == 4
    assert "another application" in one_clear_line(run)
    assert digest(foreign) == before
    assert not foreign.with_name(foreign.name + "-wal").exists()


@pytest.mark.parametrize("command", [["stats"], ["inspect", "episodes"], ["search", "anything"], ["flush"]])
def test_reading_an_empty_file_leaves_it_empty(tmp_path, command):
    path = tmp_path / "empty.db"
    path.touch()
    run = nemori(*command, "--db", str(path))
    assert run.returncode == 4 and "empty file" in one_clear_line(run)
    assert path.stat().st_size == 0


def test_a_directory_given_as_the_database_is_named_as_one(tmp_path):
    run = nemori("stats", "--db", str(tmp_path))
    assert run.returncode == 4 and "is a directory" in one_clear_line(run)


# -- special files: refused by what they are, at once, nothing written beside them --------------


def _special(kind: str, tmp_path):
    import socket

    if kind == "fifo":
        path = tmp_path / "ff"
        os.mkfifo(path)
        return path, None
    if kind == "socket":
        path = tmp_path / "sock"
        held = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        held.bind(str(path))
        return path, held
    if kind == "loop":
        (tmp_path / "a").symlink_to(tmp_path / "b")
        (tmp_path / "b").symlink_to(tmp_path / "a")
        return tmp_path / "a", None
    return __import__("pathlib").Path("/dev/null"), None


@pytest.mark.parametrize(
    ("kind", "said"),
    [("fifo", "a named pipe (FIFO)"), ("socket", "a socket"), ("loop", "a loop of symbolic links"), ("devnull", "a character device")],
)
@pytest.mark.parametrize("command", [["search", "cat"], ["stats"], ["ingest", str(REPO / "examples" / "chat.jsonl")]])
def test_a_special_file_as_the_database_is_refused_by_what_it_is(tmp_path, kind, said, command):
    path, held = _special(kind, tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    journal_before = os.path.exists("/dev/null-journal")
    try:
        started = time.monotonic()
        run = nemori(*command, "--db", str(path))
        line = one_clear_line(run)
        assert run.returncode == 4 and f"is {said}, not a database file" in line, line
        assert time.monotonic() - started < 60  # a FIFO does not stall a read until something writes to it
    finally:
        if held is not None:
            held.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no -journal, -wal or -shm beside it
    assert os.path.exists("/dev/null-journal") == journal_before


def test_ingest_into_another_applications_file_is_refused_before_a_model_loads(foreign, tmp_path):
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"speaker": "Ann", "content": "hello", "timestamp": "2024-03-01T10:00:00"}\n')
    before = digest(foreign)
    # An unknown model would fail with exit 3 were it loaded first.
    run = nemori("ingest", str(chat), "--db", str(foreign), "--model", "/nowhere/model.gguf")
    assert run.returncode == 4 and "another application" in one_clear_line(run)
    assert digest(foreign) == before


def test_a_read_only_database_is_refused_before_a_model_loads(tmp_path, monkeypatch, db):
    """Root may write anywhere, so the permission is denied through os.access (what the check asks)."""
    sqlite_only(db, "a file's permissions; a server says what a login may write")
    real = os.access
    monkeypatch.setattr(sqlite_files.os, "access", lambda p, mode: False if mode == os.W_OK and str(p) == str(db.path) else real(p, mode))
    with pytest.raises(StoreError, match="read-only"):
        sqlite_files.refuse_read_only(db.path)
    from nemori_cli import deps
    from nemori_cli.config import Settings

    with pytest.raises(StoreError, match="read-only"):
        deps.session(Settings.from_env(db=str(db.path), model="/nowhere/model.gguf"), create=True)


# -- two writers ------------------------------------------------------------


def test_a_second_writer_waits_for_the_first_instead_of_failing(tmp_path, embedder):
    path = tmp_path / "m.db"
    first, second = SqliteStore(path), SqliteStore(path)
    first.bind_embedder(identity(embedder), embedder.dimensions)
    holding = threading.Event()

    def long_unit_of_work():
        with first.transaction():
            message_sql.insert_messages(first, "a", make_messages(3, topic="first"))
            holding.set()
            time.sleep(1.5)  # an episode's model calls, inside its transaction

    worker = threading.Thread(target=long_unit_of_work)
    worker.start()
    holding.wait(5)
    started = time.perf_counter()
    with second.transaction():  # would have been "database is locked" when a read turned into a write
        message_sql.count_pending(second, "b")
        message_sql.insert_messages(second, "b", make_messages(2, topic="second"))
    waited = time.perf_counter() - started
    worker.join()
    assert waited > 0.5  # it waited for the first writer's commit
    assert message_sql.count_pending(first, "a") == 3 and message_sql.count_pending(first, "b") == 2
    first.close()
    second.close()


def test_a_writer_locked_out_too_long_gets_one_line_and_writes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "m.db"
    holder, waiter = SqliteStore(path), SqliteStore(path)
    monkeypatch.setattr(sqlite_connection, "WRITE_WAIT_MS", 200)
    holder.conn.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreError, match="locked by another writer"), waiter.transaction():
        message_sql.insert_messages(waiter, "u", make_messages(2))
    holder.conn.execute("ROLLBACK")
    assert message_sql.count_pending(waiter, "u") == 0
    holder.close()
    waiter.close()


# -- forget with a reader open ------------------------------------------------


def _secret_file(tmp_path, embedder):
    path = tmp_path / "m.db"
    db = SqliteStore(path)
    db.bind_embedder(identity(embedder), embedder.dimensions)
    with db.transaction():
        message_sql.insert_messages(db, "bob", make_messages(40, topic="zanzibarsecret"))
    db.checkpoint()
    db.close()
    return path


def _on_disk(path, needle: bytes) -> bool:
    return any(p.exists() and needle in p.read_bytes() for p in (path, path.with_name(path.name + "-wal")))


def test_forget_says_so_when_an_open_reader_keeps_the_text_in_the_file_and_scrub_finishes(tmp_path, embedder):
    path = _secret_file(tmp_path, embedder)
    reader = apsw.Connection(str(path))
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM messages").fetchall()[0][0] == 40  # a snapshot held open
    run = nemori("forget", "user", "bob", "--yes", "--db", str(path))
    assert run.returncode == 4 and "another process reading" in one_clear_line(run)
    reader.execute("ROLLBACK")
    reader.close()
    assert nemori("stats", "--db", str(path), "--user", "bob", "--json").returncode == 0
    run = nemori("forget", "--scrub", "--db", str(path))
    assert run.returncode == 0, run.stderr
    assert not _on_disk(path, b"zanzibarsecret")


def test_forget_without_readers_scrubs_at_once(tmp_path, embedder):
    path = _secret_file(tmp_path, embedder)
    run = nemori("forget", "user", "bob", "--yes", "--db", str(path))
    assert run.returncode == 0, run.stderr
    assert not _on_disk(path, b"zanzibarsecret")
