"""The SQLite engine of the store contract (store/contract.py): apsw + sqlite-vec, WAL, busy timeout, migrations.

CPython's own sqlite3 often cannot load extensions (it is built without
enable_load_extension here, and on many macOS and pyenv Pythons), so the
store uses apsw, which bundles a current SQLite on every platform.

Concurrent writers: every unit of work takes the write lock when it starts
(BEGIN IMMEDIATE), so a second writer waits for it (up to WRITE_WAIT_MS)
instead of failing midway when a read turns into a write; readers are never
blocked (WAL), and a read of several statements (search, inspect's lists,
stats) is one snapshot, so it never sees half of another unit of work. What SQLite refuses (busy past the wait, a read-only file, a
full disk, a write the system refused: a disk I/O error) becomes one
StoreError line, with the unit of work rolled back; so does a file deleted or
moved (its folder removed) while it was open, which SQLite in WAL mode would
go on writing to unseen.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import apsw
import numpy as np

from nemori_cli.errors import StoreError
from nemori_cli.store import sqlite_connection, sqlite_migrate, sqlite_tables, sqlite_vector_tables
from nemori_cli.store.asof import Within
from nemori_cli.store.base import StoreBase
from nemori_cli.store.contract import Dangling, TableShape
from nemori_cli.store.index import TEXT_TABLES
from nemori_cli.store.sqlite_connection import BUSY_TIMEOUT_MS, io_reason, prepare, use_wal, writing
from nemori_cli.store.sqlite_files import foreign_error, refuse_unusable
from nemori_cli.store.sqlite_vectors import QuantisedSearch


class SqliteStore(StoreBase):
    """One connection to one nemori file. Use ``transaction()`` for each unit of work, ``snapshot()`` for a read of several statements."""

    engine = "sqlite"
    one_write_lock = True  # one write lock per file, whoever's unit of work it is
    read_only = False  # store/readonly.py's subclass opens a file for reading only
    path: Path
    conn: apsw.Connection  # rows come back as dicts (row_trace), as the contract's Connection says
    _reading = False  # inside snapshot(): a write there would fail midway, so transaction() refuses it
    _identity: tuple[int, int] | None = None  # (device, inode) of the file opened: a file deleted or replaced since is noticed

    def __init__(self, path: Path, *, create: bool = True, schema: int | None = None):
        """Open (``create``: or make) a nemori file; another application's SQLite file is refused, never changed.

        ``schema`` stops the migrations at that number (import-memory restores
        an older export at its own schema, then opens the file again to upgrade it).
        """
        self.path = Path(path)
        self._schema = schema
        memory = str(self.path) == ":memory:"
        if not memory:
            refuse_unusable(self.path, create=create)
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = apsw.Connection(str(self.path))
        except apsw.Error as e:
            raise StoreError(f"cannot open database {self.path}: {e}") from None
        prepare(self.conn)
        try:
            if not memory and self.path.stat().st_size > 0 and not self._is_nemori():
                self.conn.close()
                raise foreign_error(self.path)
            use_wal(self.conn, self.path)
            self.conn.execute("PRAGMA foreign_keys = ON")
            sqlite_migrate.migrate(self, self._schema)
            sqlite_vector_tables.ensure(self)
        except apsw.NotADBError:
            raise StoreError(f"{self.path} is not a SQLite database") from None
        except apsw.BusyError:
            self.conn.close()
            raise StoreError(f"{self.path} stayed locked by another process while opening it; nothing was written: rerun") from None
        except (apsw.ReadOnlyError, apsw.CantOpenError) as e:
            raise StoreError(f"{self.path} cannot be written ({e}); nemori needs write access to the file and its folder") from None
        except (apsw.FullError, apsw.IOError) as e:
            reason = io_reason(self.conn, e)
            self.conn.close()
            raise StoreError(f"{self.path} cannot be opened for writing ({reason}): free space and rerun") from None
        if not memory:
            opened = self.path.stat()
            self._identity = (opened.st_dev, opened.st_ino)

    def _is_nemori(self) -> bool:
        """Whether this file holds nemori's schema (or nothing at all yet)."""
        tables = {r["name"] for r in self.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return not tables or "schema_migrations" in tables

    # -- plumbing ---------------------------------------------------------
    @contextmanager
    def transaction(self, user: str | None = None) -> Iterator[apsw.Connection]:
        """All or nothing: an exception (Ctrl-C included) rolls everything back.

        The outermost one takes the write lock first (waiting for another
        writer); a nested one is a savepoint inside it. ``user`` names whose
        unit of work it is: SQLite's one write lock already serialises every
        unit, so it changes nothing here (PostgreSQL locks per user: store/pg.py).
        """
        if self._reading:
            raise RuntimeError("a write inside SqliteStore.snapshot(): take the snapshot after the unit of work, or outside it")
        if not self.conn.in_transaction:
            self._still_there()
            with writing(self.conn, self.path):
                self.conn.set_busy_timeout(sqlite_connection.WRITE_WAIT_MS)
                try:
                    self.conn.execute("BEGIN IMMEDIATE")
                finally:
                    self.conn.set_busy_timeout(BUSY_TIMEOUT_MS)
                try:
                    yield self.conn
                    self.conn.execute("COMMIT")
                except BaseException:
                    self._rollback()
                    raise
            return
        with self.conn:
            yield self.conn

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads that see one committed state: a read of several statements never sees half of another connection's unit of work.

        Without it each statement sees the latest commit, so a merge committed
        between "which episodes" and "their messages" showed an episode with
        none. A read transaction (BEGIN, first read, COMMIT) blocks no writer;
        keep it short (no model calls inside): while it is open a checkpoint
        cannot fold the log in past it. Inside a unit of work or another
        snapshot, that one is used.
        """
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN DEFERRED")
        self._reading = True
        try:
            yield
        finally:
            self._reading = False
            self.conn.execute("COMMIT")  # a read transaction: nothing to keep or lose

    def _rollback(self) -> None:
        """Undo the unit of work, unless SQLite already has: after a failed write (full disk, I/O error) it may roll back by itself."""
        if not self.conn.in_transaction:
            return
        # The error that brought us here says more; closing the connection rolls back what is left.
        with contextlib.suppress(apsw.Error):
            self.conn.execute("ROLLBACK")

    def _still_there(self) -> None:
        """Refuse a unit of work on a file deleted or replaced since it was opened: SQLite (WAL) would write to the deleted file unseen."""
        if self._identity is None:
            return
        try:
            now = self.path.stat()
        except OSError:
            now = None
        if now is None or (now.st_dev, now.st_ino) != self._identity:
            raise StoreError(
                f"{self.path} was deleted or moved while nemori had it open (is its folder gone?); "
                "nothing more was written to it: put it back, or give another --db, and rerun"
            )

    def checkpoint(self) -> bool:
        """Fold the write-ahead log into the file: reads after a big ingest stay fast.

        False when a reader's open snapshot kept part of the log from being
        folded in (after the busy timeout): the file then still holds pages
        from before the last commits, which matters only to forget.
        """
        with writing(self.conn, self.path, f"everything committed is kept in {self.path.name}-wal"):
            row = self.one("PRAGMA wal_checkpoint(TRUNCATE)")
        return not row or (row["busy"] == 0 and row["log"] == row["checkpointed"])

    def close(self) -> None:
        self.conn.close()

    errors = apsw.Error  # what a refused statement raises (restore names the row it came from)

    def ids_restored(self) -> None:
        """After rows were inserted with their own ids: nothing to do, SQLite's next rowid follows the largest."""

    def size_bytes(self) -> int:
        """The file's size on disk (its -wal log not included)."""
        return self.path.stat().st_size if str(self.path) != ":memory:" else 0

    # -- schema -----------------------------------------------------------
    def schema_version(self) -> int:
        row = self.one("SELECT max(id) AS v FROM schema_migrations")
        return int(row["v"]) if row and row["v"] is not None else 0

    # -- meta ---------------------------------------------------------------
    def bind_embedder(self, identity: str, dimensions: int) -> None:
        """Record the embedder and create the vector tables for its width (once)."""
        self.check_embedder(identity)
        if self.embedder_identity() == identity:
            return
        with self.transaction():
            self._create_vector_tables(dimensions)
            self.set_meta("embedder", identity)

    def _create_vector_tables(self, dimensions: int) -> None:
        """The vector tables for this width (store/sqlite_vector_tables.py); what this connection knew of them is read anew."""
        self._quantised = None
        self._bits_tables = None
        sqlite_vector_tables.create(self.conn, dimensions)

    def insert_vector(self, table: str, rowid: int, user: str, embedding: bytes | np.ndarray | Sequence[float]) -> None:
        """One row's vector, into the float table and its quantised copy (``embedding``: float32 bytes or an array)."""
        blob = embedding if isinstance(embedding, bytes) else np.asarray(embedding, dtype=np.float32).tobytes()
        sqlite_vector_tables.insert(self.conn, table, rowid, user, blob, bits=self._has_bits(table))

    def delete_vectors(self, table: str, ids: Iterable[int]) -> int:
        """Drop rows' vectors from the float table and its quantised copy (one at a time: vec0 point lookups); how many float rows went."""
        return sqlite_vector_tables.delete(self.conn, table, ids, bits=self._has_bits(table))

    _quantised: QuantisedSearch | None = None  # made on the first search, anew when the vector tables are made

    @property
    def quantised(self) -> QuantisedSearch:
        """The sign-bit search of this connection (store/sqlite_vectors.py)."""
        if self._quantised is None:
            self._quantised = QuantisedSearch(self)
        return self._quantised

    _bits_tables: set[str] | None = None  # the quantised tables this file has (read once per connection)

    def _has_bits(self, table: str) -> bool:
        if self._bits_tables is None:
            self._bits_tables = sqlite_vector_tables.bits_tables(self)
        return f"{table}_bits" in self._bits_tables

    # -- search: what each engine says its own way (store/pg.py has the other) --
    def vector_search(self, table: str, user: str, query: np.ndarray, k: int, within: Within | None = None) -> list[tuple[int, float]]:
        """(row id, cosine similarity), best first, within one user's partition (and ``within``'s rows).

        A user with QUANTISED_MIN_ROWS vectors or more is searched through the
        quantised table (store/sqlite_vectors.py); ``within`` and smaller users
        get the exact scan.
        """
        if within is None and k > 0:
            found = self.quantised.search(table, user, np.asarray(query, dtype=np.float32), k)
            if found is not None:
                return found
        # vec0 takes a rowid IN constraint into its KNN scan: the k nearest of the
        # rows allowed, not the k nearest filtered afterwards.
        allowed = f" AND rowid IN ({within.sql})" if within else ""
        rows = self.query(
            f"SELECT rowid, distance FROM {table} WHERE embedding MATCH ? AND k = ? AND user_id = ?{allowed} ORDER BY distance",
            (np.asarray(query, dtype=np.float32).tobytes(), k, user, *(within.params if within else ())),
        )
        # vec0's cosine metric reports a distance (1 - cosine); report similarity.
        return [(int(r["rowid"]), 1.0 - float(r["distance"])) for r in rows]

    # Full text through FTS5, ranked by BM25.
    def _match_text(self, words: list[str]) -> str:
        return _any_of(words)

    def _ranked_sql(self, fts: str, allowed: str, *, bounded: bool) -> str:
        if not bounded:
            return f"SELECT rowid, bm25({fts}) AS rank FROM {fts} WHERE {fts} MATCH ? AND user_id = ?{allowed} ORDER BY rank LIMIT ?"
        # FTS5 walks the matching rows in rowid order: the first max_rows of them are scored.
        return (
            f"SELECT rowid, rank FROM (SELECT rowid, bm25({fts}) AS rank FROM {fts}"
            f" WHERE {fts} MATCH ? AND user_id = ?{allowed} LIMIT ?) ORDER BY rank, rowid LIMIT ?"
        )

    def _score(self, rank: float) -> float:
        return -rank  # SQLite's BM25 is lower-is-better

    def doc_freq(self, fts: str, words: list[str], *, at_most: int | None = None) -> dict[str, int]:
        """How many indexed rows hold each word, from the fts5vocab table beside the index.

        The vocabulary holds porter stems, so a word indexed under another
        form ("running" as "run") is missing from it. Without ``at_most`` it is
        left out of the answer (the caller treats it as rare). With it, the
        caller needs to know which words are in more rows than that, and such
        a word is counted by MATCH, stopping at ``at_most`` + 1.
        """
        if not words:
            return {}
        marks = ",".join("?" * len(words))
        out = {r["term"]: r["doc"] for r in self.query(f"SELECT term, doc FROM {fts}_terms WHERE term IN ({marks})", tuple(words))}
        if at_most is not None:
            for w in words:
                if w not in out:
                    row = self.one(
                        f"SELECT count(*) AS n FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? LIMIT ?)", (_any_of([w]), at_most + 1)
                    )
                    out[w] = int(row["n"]) if row else 0
        return out

    def estimated_rows(self, table: str) -> int:
        """A table's rows: SQLite keeps no estimate outside ANALYZE's sqlite_stat1, so they are counted."""
        return int(self.scalar(f"SELECT count(*) AS n FROM {table}"))

    def text_contains(self, fts: str, user: str, word: str, within: Within | None = None) -> bool:
        """Whether any of the user's indexed rows (``within``'s) holds the word (stemmed as the index is)."""
        allowed = f" AND rowid IN ({within.sql})" if within else ""
        return (
            self.one(
                f"SELECT 1 AS x FROM {fts} WHERE {fts} MATCH ? AND user_id = ?{allowed} LIMIT 1",
                (_any_of([word]), user, *(within.params if within else ())),
            )
            is not None
        )

    # -- tables and space ------------------------------------------------------
    def table_names(self) -> list[str]:
        return [r["name"] for r in self.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]

    def columns(self, table: str) -> list[str]:
        return [r["name"] for r in self.query("SELECT name FROM pragma_table_info(?)", (table,))]

    # Export and restore's view of the schema (store/sqlite_tables.py).
    def plain_tables(self) -> list[str]:
        return sqlite_tables.plain_tables(self)

    def user_tables(self) -> list[TableShape]:
        return sqlite_tables.user_tables(self)

    def defer_foreign_keys(self) -> None:
        sqlite_tables.defer_foreign_keys(self)

    def dangling_reference(self) -> Dangling | None:
        return sqlite_tables.dangling_reference(self)

    def erase_on_delete(self) -> None:
        """Deleted rows' bytes are overwritten in the file, not left in free pages."""
        self.conn.execute("PRAGMA secure_delete = ON")

    def compact_text_indexes(self) -> None:
        """Rewrite each FTS5 index, so no segment keeps a deleted row's terms."""
        for fts in TEXT_TABLES:
            self.conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")

    def vacuum(self) -> bool:
        """Rewrite the file without free pages; False when another process's read kept it from running."""
        try:
            self.conn.execute("VACUUM")
        except apsw.BusyError:
            return False
        return True


def _any_of(words: list[str]) -> str:
    """FTS5 MATCH text for any of the words, each quoted (user text is never FTS5 syntax)."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
