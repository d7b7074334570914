"""What both store engines share: reading rows, the meta table, the embedder a store is bound to.

The store protocol is the set of methods both engines offer (store/db.py for
SQLite, store/pg.py for PostgreSQL; docs/ARCHITECTURE.md lists them). What is
written once for both lives here; each engine subclasses it and adds its own
connection, transactions and search.
"""

from __future__ import annotations

from nemori_cli.errors import StoreError


class StoreBase:
    """The part of the store protocol that is the same SQL on both engines."""

    engine = ""  # "sqlite" | "postgresql"
    path: object  # what messages call the store: the file's path, or the server's URL without its password
    conn: object  # the engine's connection: execute(sql, params) gives rows as dicts

    def query(self, sql: str, params: tuple | dict = ()) -> list[dict]:
        return list(self.conn.execute(sql, params))

    def one(self, sql: str, params: tuple | dict = ()) -> dict | None:
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
                f"{self.path} was built with embedder {stored}, not {identity}; "
                "use --embedder with the original one, or a new --db"
            )

    def has_vectors(self) -> bool:
        return self.embedder_identity() is not None
