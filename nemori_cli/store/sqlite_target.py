"""A SQLite store's target: a file on this machine (the default engine: whatever --db names that is not a URL)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from nemori_cli.store.target import StoreTarget

if TYPE_CHECKING:
    from nemori_cli.store.contract import Store


class SqliteTarget(StoreTarget):
    engine = "sqlite"

    def __init__(self, text: str):
        super().__init__(text)
        self.file = Path(text).expanduser()

    @property
    def name(self) -> str:
        return str(self.file)

    @property
    def path(self) -> Path:
        return self.file

    @property
    def spec(self) -> str:
        return str(self.file)

    def for_child(self) -> str:
        return str(self.file.resolve())

    def exists(self) -> bool:
        return self.file.exists()

    def cannot_write(self) -> bool:
        """Whether this process may not write the file or its folder (root may always)."""
        path = self.file
        return path.is_file() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))

    def refuse(self, *, create: bool = False, write: bool = False) -> None:
        from nemori_cli.store.sqlite_files import refuse_foreign, refuse_read_only, refuse_special, refuse_unusable

        refuse_special(self.file)  # every command, reads too: SQLite would block on a FIFO
        if create or write:  # a command that writes learns now, before any model loads, that it cannot
            refuse_unusable(self.file, create=create)
            refuse_read_only(self.file)
            refuse_foreign(self.file)

    def refuse_unservable(self) -> None:
        from nemori_cli.store.sqlite_files import refuse_foreign, refuse_unusable

        refuse_unusable(self.file, create=True)
        refuse_foreign(self.file)

    def open(self, *, create: bool = True, read_only: bool = False, schema: int | None = None) -> Store:
        if read_only:
            from nemori_cli.store.readonly import ReadOnlySqliteStore

            return ReadOnlySqliteStore(self.file)
        from nemori_cli.store.sqlite import SqliteStore

        return SqliteStore(self.file, create=create, schema=schema)

    def peek(self) -> Store | None:
        """Read-only without a trace (store/readonly.py); None for a missing or empty file (SQLite takes an empty file for a new database)."""
        if not self.file.is_file() or self.file.stat().st_size == 0:
            return None
        return self.open(create=False, read_only=True)

    def lock_key(self) -> str:
        try:
            st = self.file.stat()
        except OSError:  # no file yet: nothing can be building it; its path until it exists
            return str(self.file.resolve())
        return f"sqlite-inode:{st.st_dev}:{st.st_ino}"  # the file itself: a hard link or another spelling is the same

    def kv_cache_dir(self, cache_dir: Path) -> Path:
        """Beside the file: the states belong to it, and go where it goes."""
        return self.file.with_name(self.file.name + ".kv")
