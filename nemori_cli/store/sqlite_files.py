"""Refusals made before a SQLite store is opened: a path a command cannot use, another application's file.

Each is one StoreError line, raised before a model loads or anything is
written, so a wrong --db costs nothing and changes nothing.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import apsw

from nemori_cli.errors import StoreError

# What a path that is not a regular file is, in words, for the refusal (stat's file types).
_SPECIAL = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
)


def refuse_special(path: Path) -> None:
    """Refuse a path that is not a regular file (a device, a FIFO, a socket, a loop of links) by what it is.

    Before SQLite touches it: SQLite would block on a FIFO, and would write
    its rollback journal beside a device (``/dev/null-journal`` in /dev).
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise StoreError(f"{path} is a loop of symbolic links, not a database file (--db / NEMORI_DB)") from None
        mode = None  # not there (yet): the checks below say what that means for this command
    if mode is not None:
        for test, what in _SPECIAL:
            if test(mode):
                raise StoreError(f"{path} is {what}, not a database file (--db / NEMORI_DB); give the path of a file")


def refuse_unusable(path: Path, *, create: bool) -> None:
    """Refuse, before anything is opened or loaded, a path a command cannot use: one StoreError line."""
    refuse_special(path)
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a database file (--db / NEMORI_DB)")
    if not path.exists():
        if not create:
            raise StoreError(f"no database at {path} (--db / NEMORI_DB); run `nemori ingest` first")
        return
    wal = path.with_name(path.name + "-wal")
    if path.stat().st_size == 0 and not (wal.exists() and wal.stat().st_size) and not create:
        raise StoreError(f"{path} is an empty file, not a nemori database; run `nemori ingest` to make one there")


def refuse_read_only(path: Path) -> None:
    """A command that writes refuses a file (or folder, for the WAL's side files) it may not write, before a model loads."""
    folder = path.parent if str(path.parent) else Path(".")
    if path.exists() and not os.access(path, os.W_OK):
        raise StoreError(f"{path} is read-only; nemori needs to write to it")
    if folder.exists() and not os.access(folder, os.W_OK):
        raise StoreError(f"{folder} is read-only; nemori writes {path.name} and its -wal and -shm files there")


def refuse_foreign(path: Path) -> None:
    """A command that writes refuses another application's SQLite file before a model loads (a read-only peek)."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    from urllib.parse import quote

    try:
        conn = apsw.Connection(f"file:{quote(str(path.resolve()))}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        try:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except apsw.NotADBError:
        raise StoreError(f"{path} is not a SQLite database") from None
    except apsw.Error:
        return  # what cannot be read this way is met, with its own message, when the file is opened
    if tables and "schema_migrations" not in tables:
        raise foreign_error(path)


def foreign_error(path: Path) -> StoreError:
    return StoreError(f"{path} is a SQLite database of another application (no nemori schema); use another --db")
