"""Where `nemori bench` keeps the memories it builds: a SQLite file each (the default), or a PostgreSQL schema each (store/many.py)."""

from __future__ import annotations

from pathlib import Path

from nemori_cli.store.many import FileStores, SchemaStores, stores_for


def bench_stores(db: str | None, out: Path) -> FileStores | SchemaStores:
    """The stores of a bench run writing into ``out``: a schema each in the database a --db URL names, else a file each under ``out``."""
    return stores_for(db, out)


__all__ = ["FileStores", "SchemaStores", "bench_stores"]
