"""Opening a nemori file to look without touching it: no migration, no pragma, no new files.

A dry run must leave the database byte for byte as it was, and must not even
leave a -wal or -shm file beside it. SQLite's plain read-only mode still
creates those two files for a WAL database (and cannot delete them again), so:

- with no -wal file, nothing is in flight and the main file is the whole
  database: it is opened `immutable`, which reads it without locks or side
  files;
- with a -wal file (another process has it open, or one crashed), that log
  holds committed rows the main file lacks: it is opened read-only with
  normal locking, and the side files are already there.

The class is a SqliteStore for reading (query, one, get_meta, check_embedder,
schema_version, search); any write fails inside SQLite, not silently. Read
commands open a file this way when they may not write it or its folder (a
read-only folder: SQLite's normal opening needs to create the side files there).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import apsw

from nemori_cli.errors import StoreError
from nemori_cli.store.migrations import MIGRATIONS
from nemori_cli.store.sqlite import SqliteStore
from nemori_cli.store.sqlite_connection import prepare


class ReadOnlySqliteStore(SqliteStore):
    read_only = True

    def __init__(self, path: Path):  # noqa: D107 - replaces SqliteStore's opening entirely
        self.path = Path(path)
        if not self.path.is_file():
            raise StoreError(f"no database at {self.path} (--db / NEMORI_DB)")
        wal = self.path.with_name(self.path.name + "-wal")
        mode = "mode=ro" if wal.exists() else "immutable=1"
        uri = f"file:{quote(str(self.path.resolve()))}?{mode}"
        try:
            self.conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
            # sqlite-vec too: a read command on a file it may not write (a read-only folder) still searches vectors.
            prepare(self.conn)
            version = self.schema_version()
        except apsw.NotADBError:
            raise StoreError(f"{self.path} is not a SQLite database") from None
        except apsw.SQLError:
            raise StoreError(f"{self.path} is not a nemori database") from None
        except apsw.Error as e:
            raise StoreError(f"cannot open database {self.path}: {e}") from None
        if version > max(m[0] for m in MIGRATIONS):
            raise StoreError(f"{self.path} was written by a newer nemori (schema {version}); upgrade nemori")
