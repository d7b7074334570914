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
trusted without the lock being held.

Which lock is "this memory's" must not depend on how it was reached:

- a SQLite file is keyed by what it is (its device and inode), not by the
  path as spelled, so a hard link or another spelling finds the same lock;
- the lock files live in one folder per system user and machine (under the
  system's temporary folder), not in the cache directory, so a second
  NEMORI_CACHE_DIR sees a build the first started; nothing is written
  beside the user's database;
- a PostgreSQL store is shared by machines, which see none of each other's
  files: there the build also takes a session advisory lock per user on the
  server (released by the server when the holder's connection ends, a
  `kill -9` or a lost machine included), and writes who holds it (pid, host,
  state) as that connection's application_name, for `stats` and `build
  --stop` on any machine.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from nemori_cli.config import Settings
from nemori_cli.store import pg_build_lock as server_lock
from nemori_cli.store.target import SharedLock

# holder() takes the lock shared for an instant to see whether anyone holds it; an acquire that meets
# such a look (from `stats`, `ask`, a waiting `build --background`) tries again for this long.
ACQUIRE_RETRY_S = 0.5


@dataclass(frozen=True)
class Holder:
    pid: int | None  # None: the holder has not written its record yet
    user: str | None
    state: str | None = None  # "loading" (its model) or "building"
    host: str | None = None  # the machine it runs on (a PostgreSQL store's builder may be on another)

    @property
    def elsewhere(self) -> bool:
        """On another machine: its pid is not one of this machine's."""
        return self.host is not None and self.host != this_host()


def lock_dir() -> Path:
    """The folder of this system user's build locks on this machine, whatever cache directory a command uses."""
    return Path(tempfile.gettempdir()) / f"nemori-builds-{os.getuid()}"


def path_for(settings: Settings) -> Path:
    """The lock file of this store and user (store/target.StoreTarget.lock_key: a SQLite file by its device and inode, a PostgreSQL store by its URL)."""
    digest = hashlib.sha256(f"{settings.store.lock_key()}\0{settings.user}".encode()).hexdigest()[:24]
    return lock_dir() / f"{digest}.lock"


def for_settings(settings: Settings) -> BuildLock:
    """The build lock of this memory: the file lock, and the store's own lock that other machines see (PostgreSQL's)."""
    return BuildLock(path_for(settings), shared=settings.store.shared_lock(settings.user), user=settings.user)


class BuildLock:
    def __init__(self, path: Path, *, shared: SharedLock | None = None, user: str | None = None):
        """``shared``: the store's lock that other machines see (StoreTarget.shared_lock), taken with the file's; ``user``: whose memory."""
        self.path = path
        self._fd: int | None = None
        self._server = shared
        self._user = user

    def acquire(self, *, user: str) -> bool | None:
        """Take the lock without waiting for a holder and write who holds it.

        False: another process holds it. None: the lock file cannot be made
        (an unwritable cache directory); the caller goes on without it, since
        the database does not need it.
        """
        try:
            _own_folder(self.path.parent)
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
        if self._server is not None and self._server.acquire() is False:  # another machine (or cache folder) builds it
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            return False
        self._fd = fd
        self.note(user=user, state="loading")
        return True

    def note(self, *, user: str, state: str) -> None:
        """Rewrite the holder's record (this process must hold the lock)."""
        if self._fd is not None:
            record = json.dumps({"pid": os.getpid(), "user": user, "state": state}).encode()
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, record, 0)
            if self._server is not None:
                self._server.note(state)

    def release(self) -> None:
        if self._server is not None:
            self._server.release()
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
        here = self._file_holder()
        if here is None and self._server is not None:
            found = self._server.holder_record()
            return None if found is None else Holder(found[0], self._user, found[1], found[2])
        return here

    def _file_holder(self) -> Holder | None:
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


def _own_folder(folder: Path) -> None:
    """Make the lock folder, private; refuse one another system user made (it could hand us its files)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.stat().st_uid != os.getuid():
        raise PermissionError(errno.EPERM, f"{folder} belongs to another user")


this_host = server_lock.this_host
