"""One build per memory (a store and a user): an advisory file lock that the kernel drops when its holder dies.

The database itself needs no such lock: two runs building one memory are
safe (each episode is one transaction that first checks its messages are
still pending). This lock is about work and its order: a second builder
would spend the same model time twice, and two builders reading the pending
messages at different moments cut them differently. So whatever builds a
user's memory (`nemori build`, an `ingest` that builds, MCP `remember`)
takes it, and the lock file names the holder (pid, user, and whether its
model is loaded yet) for `stats`, `ask` and `build --stop`.

flock(2) rather than a pid file alone: a `kill -9` releases it with the
process, so a dead worker never blocks the next build, and no pid is ever
trusted without the lock being held. The file lives in nemori's cache
directory, keyed by the store and the user, so nothing is written beside the
user's database. It is a lock of this machine: two machines building one
PostgreSQL store do not see each other's (each is still safe, as above).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from nemori_cli.config import Settings

# holder() takes the lock shared for an instant to see whether anyone holds it; an acquire that meets
# such a look (from `stats`, `ask`, a waiting `build --background`) tries again for this long.
ACQUIRE_RETRY_S = 0.5


@dataclass(frozen=True)
class Holder:
    pid: int | None  # None: the holder has not written its record yet
    user: str | None
    state: str | None = None  # "loading" (its model) or "building"


def path_for(settings: Settings) -> Path:
    """The lock file of this store and user (a SQLite file by its real path, a PostgreSQL store by its URL)."""
    store = settings.store_name if settings.db_url else str(settings.db_path.expanduser().resolve())
    digest = hashlib.sha256(f"{store}\0{settings.user}".encode()).hexdigest()[:24]
    return settings.cache_dir / "builds" / f"{digest}.lock"


class BuildLock:
    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def acquire(self, *, user: str) -> bool | None:
        """Take the lock without waiting for a holder and write who holds it.

        False: another process holds it. None: the lock file cannot be made
        (an unwritable cache directory); the caller goes on without it, since
        the database does not need it.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return None
        deadline = time.monotonic() + ACQUIRE_RETRY_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline or _read(fd).pid is not None:  # a real holder, not a look
                    os.close(fd)
                    return False
                time.sleep(0.02)
        self._fd = fd
        self.note(user=user, state="loading")
        return True

    def note(self, *, user: str, state: str) -> None:
        """Rewrite the holder's record (this process must hold the lock)."""
        if self._fd is not None:
            record = json.dumps({"pid": os.getpid(), "user": user, "state": state}).encode()
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, record, 0)

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)  # before the unlock: a reader never sees a stale holder on a free lock
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder(self) -> Holder | None:
        """Who holds the lock now (another process, or this object), or None when nobody does (or it cannot be read)."""
        if self._fd is not None:
            return _read(self._fd)
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None  # no lock file (nobody ever built here), or one this process may not read
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _read(fd)
            except OSError as e:
                if e.errno in (errno.EACCES, errno.EAGAIN):
                    return _read(fd)
                raise
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def __enter__(self) -> BuildLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read(fd: int) -> Holder:
    """The holder's record; a holder that has not written it yet is known only to exist."""
    try:
        raw = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (ValueError, OSError):
        raw = {}
    raw = raw if isinstance(raw, dict) else {}
    pid, user, state = raw.get("pid"), raw.get("user"), raw.get("state")
    return Holder(pid if isinstance(pid, int) else None, user if isinstance(user, str) else None, state if isinstance(state, str) else None)
