"""A SQLite connection as the store uses it: rows as dicts, sqlite-vec loaded, WAL, and SQLite's refusals as one line each."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import sqlite_vec
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_random_exponential

from nemori_cli.errors import StoreError
from nemori_cli.store.contract import Row

BUSY_TIMEOUT_MS = 10_000
# A writer holds the lock through one episode's model calls (seconds to a
# minute with a CPU model), so another writer waits long before giving up.
WRITE_WAIT_MS = 600_000


def dict_rows(cursor: apsw.Cursor, row: tuple[Any, ...]) -> Row:
    return {d[0]: v for d, v in zip(cursor.get_description(), row)}


def prepare(conn: apsw.Connection) -> None:
    """The busy timeout, rows as dicts (the contract's Connection), and the sqlite-vec extension."""
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    conn.row_trace = dict_rows
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)


def use_wal(conn: apsw.Connection, path: Path) -> None:
    """Switch a new file to WAL; two processes making the same new file both try it at once.

    Switching needs the exclusive lock. When both connections hold a read
    lock and each wants it, SQLite answers BUSY at once without calling the
    busy handler (waiting could never end), so the busy timeout does not
    help: CI saw two writers on one new file end in a traceback. Retrying
    after a short random pause lets one win; the other then finds WAL set.
    """
    if str(path) == ":memory:":
        conn.execute("PRAGMA journal_mode = WAL")
        return
    for attempt in Retrying(
        retry=retry_if_exception_type(apsw.BusyError),
        wait=wait_random_exponential(multiplier=0.02, max=0.5),
        stop=stop_after_delay(BUSY_TIMEOUT_MS / 1000),
        reraise=True,
    ):
        with attempt:
            mode = conn.execute("PRAGMA journal_mode").fetchone()
            if not mode or next(iter(mode.values())) != "wal":
                conn.execute("PRAGMA journal_mode = WAL")


def io_reason(conn: apsw.Connection, e: apsw.Error) -> str:
    """'File too large, SQLITE_IOERR_WRITE': the system's reason, when SQLite kept it, and SQLite's code."""
    extended = getattr(e, "extendedresult", None)
    code = (apsw.mapping_extended_result_codes.get(extended, "") if extended is not None else "") or type(e).__name__
    errno = conn.system_errno
    return f"{os.strerror(errno)}, {code}" if errno else f"disk I/O error, {code}"


@contextmanager
def writing(conn: apsw.Connection, path: Path, undone: str = "this unit of work was rolled back") -> Iterator[None]:
    """SQLite's refusals of a write, as one line each (the transaction is rolled back by then)."""
    try:
        yield
    except apsw.BusyError:
        raise StoreError(
            f"{path} stayed locked by another writer for {WRITE_WAIT_MS // 1000} s; nothing of this unit was written: rerun to resume"
        ) from None
    except apsw.ReadOnlyError:
        raise StoreError(f"{path} is read-only; nothing was written") from None
    except apsw.FullError:
        raise StoreError(f"the disk holding {path} is full; {undone}: free space and rerun to resume") from None
    except apsw.IOError as e:
        # A write the system refused: ENOSPC mid-write, a quota, a file-size limit (EFBIG), a failing disk.
        raise StoreError(f"writing {path} failed ({io_reason(conn, e)}); {undone}: free space and rerun to resume") from None
