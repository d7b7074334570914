"""One build per database: an advisory file lock that the kernel drops when its holder dies.

The database itself needs no such lock: two runs building one memory are
safe (each episode is one transaction that first checks its messages are
still pending). This lock is about work: a second builder would only spend
the same model time twice. So `nemori build` (foreground or background)
takes it, and the lock file names the holder (pid, user) for `stats`,
`ask` and `build --stop`.

flock(2) rather than a pid file alone: a `kill -9` releases it with the
process, so a dead worker never blocks the next build, and no pid is ever
trusted without the lock being held. The file lives in nemori's cache
directory, keyed by the store, so nothing is written beside the user's
database.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from nemori_cli.config import Settings


@dataclass(frozen=True)
class Holder:
    pid: int | None
    user: str | None


def path_for(settings: Settings) -> Path:
    """The lock file of the store ``settings`` name (a SQLite file by its real path, a PostgreSQL store by its URL)."""
    identity = settings.store_name if settings.db_url else str(settings.db_path.expanduser().resolve())
    digest = hashlib.sha256(identity.encode()).hexdigest()[:24]
    return settings.cache_dir / "builds" / f"{digest}.lock"


class BuildLock:
    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def acquire(self, *, user: str) -> bool:
        """Take the lock without waiting and write who holds it; False when another process holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "user": user}).encode(), 0)
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)  # before the unlock: a reader never sees a stale holder on a free lock
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def holder(self) -> Holder | None:
        """Who holds the lock now (another process, or this object), or None when nobody does."""
        if self._fd is not None:
            return Holder(os.getpid(), None)
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _read(fd)
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
    except ValueError:
        raw = {}
    raw = raw if isinstance(raw, dict) else {}
    pid, user = raw.get("pid"), raw.get("user")
    return Holder(pid if isinstance(pid, int) else None, user if isinstance(user, str) else None)
