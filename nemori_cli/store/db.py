"""Opening the database: apsw + sqlite-vec, WAL, busy timeout, migrations.

CPython's own sqlite3 often cannot load extensions (it is built without
enable_load_extension here, and on many macOS and pyenv Pythons), so the
store uses apsw, which bundles a current SQLite on every platform.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import apsw
import sqlite_vec

from nemori_cli.errors import StoreError
from nemori_cli.store.migrations import MIGRATIONS

BUSY_TIMEOUT_MS = 10_000
VECTOR_TABLES = ("episode_vec", "fact_vec", "note_vec", "message_vec")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _dict_rows(cursor: apsw.Cursor, row: tuple) -> dict:
    return {d[0]: v for d, v in zip(cursor.get_description(), row)}


class Database:
    """One connection to one nemori file. Use ``transaction()`` for each unit of work."""

    def __init__(self, path: Path, *, create: bool = True):
        self.path = Path(path)
        if not create and not self.path.exists():
            raise StoreError(f"no database at {self.path} (--db / NEMORI_DB); run `nemori ingest` first")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = apsw.Connection(str(self.path))
        except apsw.Error as e:
            raise StoreError(f"cannot open database {self.path}: {e}") from None
        self.conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        self.conn.row_trace = _dict_rows
        self.conn.enable_load_extension(True)
        self.conn.load_extension(sqlite_vec.loadable_path())
        self.conn.enable_load_extension(False)
        try:
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA foreign_keys = ON")
            self._migrate()
            self._ensure_vector_tables()
        except apsw.NotADBError:
            raise StoreError(f"{self.path} is not a SQLite database") from None

    # -- plumbing ---------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[apsw.Connection]:
        """All or nothing: an exception (Ctrl-C included) rolls everything back."""
        with self.conn:
            yield self.conn

    def query(self, sql: str, params: tuple | dict = ()) -> list[dict]:
        return list(self.conn.execute(sql, params))

    def one(self, sql: str, params: tuple | dict = ()) -> dict | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the file: reads after a big ingest stay fast."""
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self.conn.close()

    # -- schema -----------------------------------------------------------
    def _migrate(self) -> None:
        with self.conn:
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
        done = {r["id"] for r in self.query("SELECT id FROM schema_migrations")}
        newest_known = max(m[0] for m in MIGRATIONS)
        if done and max(done) > newest_known:
            raise StoreError(f"{self.path} was written by a newer nemori (schema {max(done)}); upgrade nemori")
        for number, name, sql in MIGRATIONS:
            if number in done:
                continue
            with self.conn:  # the migration and its record, together
                self.conn.execute(sql)
                self.conn.execute(
                    "INSERT INTO schema_migrations(id, name, applied_at) VALUES (?, ?, ?)",
                    (number, name, now_iso()),
                )

    def schema_version(self) -> int:
        row = self.one("SELECT max(id) AS v FROM schema_migrations")
        return int(row["v"]) if row and row["v"] is not None else 0

    # -- meta ---------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.one("SELECT value FROM meta WHERE key = ?", (key,))
        return row["value"] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def embedder_identity(self) -> str | None:
        return self.get_meta("embedder")

    def check_embedder(self, identity: str) -> None:
        """Refuse to mix vectors of two embedders in one file."""
        stored = self.embedder_identity()
        if stored is not None and stored != identity:
            raise StoreError(
                f"{self.path} was built with embedder {stored}, not {identity}; "
                "use --embedder with the original one, or a new --db"
            )

    def bind_embedder(self, identity: str, dimensions: int) -> None:
        """Record the embedder and create the vector tables for its width (once)."""
        self.check_embedder(identity)
        if self.embedder_identity() == identity:
            return
        with self.transaction():
            self._create_vector_tables(dimensions)
            self.set_meta("embedder", identity)

    def _create_vector_tables(self, dimensions: int) -> None:
        for table in VECTOR_TABLES:
            self.conn.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING vec0("
                f" user_id TEXT PARTITION KEY,"
                f" embedding float[{int(dimensions)}] distance_metric=cosine)"
            )

    def _ensure_vector_tables(self) -> None:
        """A file bound before a newer vector table existed gets it now."""
        identity = self.embedder_identity()
        if identity is None:
            return
        dimensions = int(identity.rsplit(":", 1)[1])
        existing = {r["name"] for r in self.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not set(VECTOR_TABLES) <= existing:
            with self.transaction():
                self._create_vector_tables(dimensions)

    def has_vectors(self) -> bool:
        return self.embedder_identity() is not None
