"""Which engine a store target opens: a postgresql:// URL is a server (store/pg.py), anything else a SQLite file (store/sqlite.py)."""

from __future__ import annotations

from pathlib import Path

from nemori_cli.config import is_store_url
from nemori_cli.errors import StoreError
from nemori_cli.store.contract import Store
from nemori_cli.store.sqlite import SqliteStore


def open_store(target: str | Path, *, create: bool = True, schema: int | None = None, read_only: bool = False) -> Store:
    """The store at ``target``: a SqliteStore (SQLite) or a PgStore (PostgreSQL), migrated to the current schema.

    The return type is the contract: mypy checks here that every engine class satisfies it. A third
    engine is one more branch, and one more class in its own modules (docs/ARCHITECTURE.md).
    """
    if is_store_url(str(target)):
        try:
            import pgvector  # noqa: F401
            import psycopg  # noqa: F401
        except ImportError:
            raise StoreError("a PostgreSQL store needs psycopg and pgvector: pip install 'nemori-cli[postgres]'") from None
        from nemori_cli.store.pg import PgStore

        return PgStore(str(target), create=create, schema=schema, read_only=read_only)
    if read_only:
        from nemori_cli.store.readonly import ReadOnlySqliteStore

        return ReadOnlySqliteStore(Path(target))
    return SqliteStore(Path(target), create=create, schema=schema)
