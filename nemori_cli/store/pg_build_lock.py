"""A PostgreSQL session advisory lock per user: the build lock that other machines see (pipeline/lock.py uses it).

Its SQL lives here, in the store layer, like every other statement.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from typing import Any

# Session advisory locks of PostgreSQL take two 32-bit keys: nemori's builds, and the user's.
_BUILDS = 0x6E6D7269  # "nmri"
_RECORD = "nemori-build "


def this_host() -> str:
    return socket.gethostname()[:32]  # as it fits in application_name with the rest


def _user_key(user: str) -> int:
    return int.from_bytes(hashlib.sha256(user.encode()).digest()[:4], "big", signed=True)


class ServerLock:
    """A PostgreSQL session advisory lock per user of the store's database, on a connection of its own held while building."""

    def __init__(self, url: str, user: str):
        self.url, self.user = url, user
        self._conn = None

    def _connect(self) -> Any:
        import psycopg

        return psycopg.connect(self.url, autocommit=True, connect_timeout=10)

    def acquire(self) -> bool | None:
        """True: held now; False: another session holds it; None: the server cannot be asked (the store will say why)."""
        try:
            conn = self._connect()
            held = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (_BUILDS, _user_key(self.user))).fetchone()[0]
        except Exception:  # psycopg's errors: the store's own connection reports the server's state, once
            return None
        if not held:
            conn.close()
            return False
        self._conn = conn
        return True

    def note(self, state: str) -> None:
        if self._conn is None:
            return
        # pg_stat_activity shows it to every session of the database: who builds, where, how far (63 bytes at most).
        record = f"{_RECORD}{os.getpid()} {state} {this_host()}"
        with contextlib.suppress(Exception):  # only the record: the lock itself is held as long as the connection is
            self._conn.execute("SELECT set_config('application_name', %s, false)", (record,))

    def release(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()  # the server drops the session's advisory lock with it
            finally:
                self._conn = None

    def holder_record(self) -> tuple[int | None, str | None, str | None] | None:
        """(pid, state, host) of the session holding this user's lock, by its record; None when nobody does (or the server cannot be asked)."""
        try:
            with self._connect() as conn:
                row = conn.execute(
                    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = %s AND l.objid = %s "
                    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                    (_BUILDS, _user_key(self.user) & 0xFFFFFFFF),
                ).fetchone()
        except Exception:
            return None
        if row is None:
            return None
        pid, state, host = ((row[0] or "").removeprefix(_RECORD).split(" ", 2) + ["", "", ""])[:3]
        return (int(pid) if pid.isdigit() else None, state or None, host or None)
