"""One build per memory, however it is reached (issue 42): a hard link, another cache folder, another machine on PostgreSQL.

Real files, real flock(2) and a real PostgreSQL server (tests/support/postgres.py);
a holder in another process where the kernel or the server must notice it die.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from nemori_cli.config import Settings
from nemori_cli.pipeline import lock
from nemori_cli.store.engines import parse_target


def _settings(monkeypatch, db, cache, user: str = "alice") -> Settings:
    monkeypatch.setenv("NEMORI_CACHE_DIR", str(cache))
    return Settings.from_env(db=str(db), user=user)


def test_a_hard_link_and_another_cache_folder_find_the_same_lock(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    db = tmp_path / "a" / "m.db"
    db.write_bytes(b"")
    os.link(db, tmp_path / "b" / "linked.db")
    first = _settings(monkeypatch, db, tmp_path / "cache1")
    linked = _settings(monkeypatch, tmp_path / "b" / "linked.db", tmp_path / "cache2")
    assert lock.path_for(first) == lock.path_for(linked)
    assert lock.path_for(first).parent == lock.lock_dir()
    assert lock.path_for(_settings(monkeypatch, db, tmp_path / "cache1", user="bob")) != lock.path_for(first)
    other = tmp_path / "a" / "other.db"
    other.write_bytes(b"")
    assert lock.path_for(_settings(monkeypatch, other, tmp_path / "cache1")) != lock.path_for(first)
    held = lock.for_settings(first)
    assert held.acquire(user="alice")
    try:
        seen = lock.for_settings(linked)
        assert seen.holder() == lock.Holder(os.getpid(), "alice", "loading") and seen.acquire(user="alice") is False
    finally:
        held.release()
    assert lock.for_settings(linked).holder() is None


def test_the_lock_folder_is_private_and_one_another_user_made_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setattr(lock.tempfile, "gettempdir", lambda: str(tmp_path))
    mine = lock.BuildLock(lock.lock_dir() / "x.lock")
    assert mine.acquire(user="alice")
    mine.release()
    assert (lock.lock_dir().stat().st_mode & 0o777) == 0o700
    monkeypatch.setattr(lock.os, "getuid", lambda: 4242)  # as if the folder were another user's
    assert lock.BuildLock(lock.lock_dir() / "y.lock").acquire(user="alice") is None


@pytest.fixture
def pg_url():
    from tests.support.postgres import new_database

    return new_database()


def _machine(tmp_path, name: str, url: str, user: str = "alice") -> lock.BuildLock:
    """A build lock as another machine has it: its own lock files (its own disk), the same server."""
    return lock.BuildLock(tmp_path / name / "build.lock", shared=parse_target(url).shared_lock(user), user=user)


def test_on_postgresql_two_machines_building_one_user_see_each_other(tmp_path, pg_url):
    first, second = _machine(tmp_path, "one", pg_url), _machine(tmp_path, "two", pg_url)
    assert first.acquire(user="alice")
    try:
        assert second.acquire(user="alice") is False
        seen = second.holder()
        assert seen == lock.Holder(os.getpid(), "alice", "loading", lock.this_host()) and not seen.elsewhere
        first.note(user="alice", state="building")
        assert second.holder().state == "building"
        bob = _machine(tmp_path, "three", pg_url, user="bob")
        assert bob.acquire(user="bob")  # one build per memory: another user's is another memory
        bob.release()
    finally:
        first.release()
    assert second.holder() is None and second.acquire(user="alice")
    second.release()


def test_on_postgresql_a_killed_holder_frees_the_lock_for_every_machine(tmp_path, pg_url):
    code = (
        "import sys, time\nfrom pathlib import Path\nfrom nemori_cli.pipeline.lock import BuildLock\nfrom nemori_cli.store.engines import parse_target\n"
        f"held = BuildLock(Path({str(tmp_path / 'one' / 'build.lock')!r}), shared=parse_target({pg_url!r}).shared_lock('alice'), user='alice')\n"
        "assert held.acquire(user='alice')\nprint('held', flush=True)\ntime.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"held"
        other = _machine(tmp_path, "two", pg_url)
        assert other.acquire(user="alice") is False and other.holder().pid == holder.pid
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    other = _machine(tmp_path, "two", pg_url)
    for _ in range(100):  # the server notices the closed connection within moments
        if other.holder() is None:
            break
        time.sleep(0.05)
    assert other.acquire(user="alice")
    other.release()


def test_a_holder_on_another_machine_is_not_signalled_here():
    assert lock.Holder(123, "alice", "building", "another-host").elsewhere
    assert not lock.Holder(123, "alice", "building", lock.this_host()).elsewhere
    assert not lock.Holder(123, "alice", "building").elsewhere  # a file lock's holder is on this machine
