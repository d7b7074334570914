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
from nemori_cli.store.asof import Within
from nemori_cli.store.contract import Connection, Params, Row, Store


def children(db: Store, table: str, parent: str, child: str, ids: list[int]) -> dict[int, tuple[int, ...]]:
    """For each of ``ids``, the ``child`` ids its rows of ``table`` name (ascending; () for none): a fact's episodes, a note's links."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    grouped: dict[int, list[int]] = {i: [] for i in ids}
    for row in db.query(f"SELECT {parent}, {child} FROM {table} WHERE {parent} IN ({marks}) ORDER BY {parent}, {child}", tuple(ids)):
        grouped[row[parent]].append(row[child])
    return {k: tuple(v) for k, v in grouped.items()}


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

    # -- full text: the same steps on each engine, its own SQL (_match_text, _ranked_sql) --
    def text_search(
        self, fts: str, user: str, words: list[str], k: int, within: Within | None = None, max_rows: int | None = None
    ) -> list[tuple[int, float]]:
        """(row id, score where higher is better) of rows holding any of ``words``, best first.

        ``max_rows``: score only the first that many matching rows (in the
        table's order, not by score), so that the cost is bounded whatever the
        word counts the caller chose the words by.
        """
        if not words:
            return []
        allowed = f" AND rowid IN ({within.sql})" if within else ""
        params = (self._match_text(words), user, *(within.params if within else ()))
        bounded = max_rows is not None
        rows = self.query(self._ranked_sql(fts, allowed, bounded=bounded), (*params, max_rows, k) if bounded else (*params, k))
        return [(int(r["rowid"]), self._score(float(r["rank"]))) for r in rows]

    def _match_text(self, words: list[str]) -> str:
        """The engine's query text for rows holding any of ``words`` (user text is never query syntax)."""
        raise NotImplementedError

    def _ranked_sql(self, fts: str, allowed: str, *, bounded: bool) -> str:
        """SELECT rowid, rank, best first; parameters: match text, user, [allowed's], [max_rows], k."""
        raise NotImplementedError

    def _score(self, rank: float) -> float:
        """The engine's rank as a score where higher is better."""
        raise NotImplementedError

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
