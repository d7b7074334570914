"""What both store engines share: reading rows, the meta table, the embedder a store is bound to.

The store protocol is the set of methods both engines offer (store/sqlite.py for
SQLite, store/pg.py for PostgreSQL; docs/ARCHITECTURE.md lists them). What is
written once for both lives here; each engine subclasses it and adds its own
connection, transactions and search.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nemori_cli.errors import StoreError
from nemori_cli.store.contract import Connection, Params, Row


class StoreBase:
    """The part of the store protocol that is the same SQL on both engines."""

    engine = ""  # "sqlite" | "postgresql"
    path: Path | str  # what messages call the store: the file's path, or the server's URL without its password
    conn: Connection  # the engine's connection: execute(sql, params) gives rows as dicts

    def query(self, sql: str, params: Params = ()) -> list[Row]:
        return list(self.conn.execute(sql, params))

    def scalar(self, sql: str, params: Params = ()) -> Any:
        """The one value of a query that always returns one row of one column (a count, an aggregate)."""
        row = self.one(sql, params)
        if row is None:
            raise StoreError(f"{self.path}: expected one row from: {sql[:80]}")
        return next(iter(row.values()))

    def one(self, sql: str, params: Params = ()) -> Row | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    # -- meta -------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.one("SELECT value FROM meta WHERE key = ?", (key,))
        return row["value"] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def delete_meta(self, key: str) -> None:
        self.conn.execute("DELETE FROM meta WHERE key = ?", (key,))

    def embedder_identity(self) -> str | None:
        return self.get_meta("embedder")

    def check_embedder(self, identity: str) -> None:
        """Refuse to mix vectors of two embedders in one store."""
        stored = self.embedder_identity()
        if stored is not None and stored != identity:
            raise StoreError(
                f"{self.path} was built with embedder {stored}, not {identity}; use --embedder with the original one, or a new --db"
            )

    def has_vectors(self) -> bool:
        return self.embedder_identity() is not None
