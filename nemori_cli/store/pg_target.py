"""A PostgreSQL store's target: a ``postgresql://`` URL (the server, the database, and with ``options=`` a schema)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from nemori_cli.errors import StoreError
from nemori_cli.store.target import SharedLock, StoreTarget, shown_url

if TYPE_CHECKING:
    from nemori_cli.store.contract import Store


class PgTarget(StoreTarget):
    engine = "postgresql"

    @property
    def name(self) -> str:
        return shown_url(self.text)

    @property
    def spec(self) -> str:
        return self.text

    def open(self, *, create: bool = True, read_only: bool = False, schema: int | None = None) -> Store:
        try:
            import pgvector  # noqa: F401
            import psycopg  # noqa: F401
        except ImportError:
            raise StoreError("a PostgreSQL store needs psycopg and pgvector: pip install 'nemori-cli[postgres]'") from None
        from nemori_cli.store.pg import PgStore

        return PgStore(self.text, create=create, schema=schema, read_only=read_only)

    def peek(self) -> Store | None:
        """Read-only (a read-only transaction on the server); None where there is no nemori store yet."""
        try:
            return self.open(create=False, read_only=True)
        except StoreError as e:
            if "no nemori store" in str(e):
                return None
            raise

    def lock_key(self) -> str:
        return self.name  # machines that share the server share the name, less the password each may spell differently

    def shared_lock(self, user: str) -> SharedLock | None:
        """The server's session advisory lock of this user (store/pg_build_lock.py): every machine sees it."""
        from nemori_cli.store.pg_build_lock import ServerLock

        return ServerLock(self.text, user)

    def kv_cache_dir(self, cache_dir: Path) -> Path:
        """In the cache folder, by the URL's digest: there is no file to put them beside."""
        return cache_dir / "kv" / hashlib.sha256(self.text.encode()).hexdigest()[:16]
