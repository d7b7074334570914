"""The PostgreSQL engine: the store on a server (psycopg 3, pgvector, full text by tsvector).

``--db postgresql://...`` (or NEMORI_DB) opens one. It implements the store
contract (store/contract.py), as the SQLite engine (store/sqlite.py) does, so
the store modules run unchanged on either: ``conn.execute`` with SQLite's SQL
(store/pg_connection.py, through store/pg_dialect.py), ``query``/``one``,
``transaction``/``snapshot``, the meta table and the embedder binding, and
the engine's own search methods.

Guarantees, and how they hold here:

- a unit of work is one transaction (an exception rolls it back); a nested
  one is a savepoint;
- a unit of work for one user (``transaction(user=...)``) first takes that
  user's advisory lock: two processes ingesting the same user take turns,
  and the second re-reads what the first committed (the pipeline checks its
  messages are still pending inside the lock), so no message lands in two
  episodes; different users never wait for each other;
- a read of several statements (``snapshot``) is one REPEATABLE READ, READ
  ONLY transaction;
- migrations and the creation of the vector tables run under one store-wide
  advisory lock, so processes opening a new store together make it once;
- a server that cannot be reached, refuses the login, or drops the
  connection becomes one StoreError line naming the server (the password is
  never shown) and what happened to the unit of work.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from nemori_cli.errors import StoreError
from nemori_cli.store import pg_tables
from nemori_cli.store.asof import Within
from nemori_cli.store.base import StoreBase
from nemori_cli.store.clock import now_iso
from nemori_cli.store.contract import Dangling, Row, TableShape
from nemori_cli.store.index import VECTOR_TABLES
from nemori_cli.store.pg_connection import PgConnection, first_line
from nemori_cli.store.pg_migrations import MIGRATIONS
from nemori_cli.store.target import shown_url

# Every vector table has an HNSW index (pgvector, cosine). A search uses it
# once the table holds HNSW_MIN_ROWS vectors (PostgreSQL's estimate), asking it
# for HNSW_CANDIDATES nearest of every user and keeping the user's: a user
# with fewer than HNSW_MIN_OWN * k among them (a small share of a big table,
# whose post-filtered answer would be thin) gets the exact scan, as do smaller
# tables and searches within a set of rows.
# docs/SEARCH_LATENCY.md ("Large stores") has the figures behind the numbers.
HNSW_MIN_ROWS = 10_000
HNSW_MIN_OWN = 2
HNSW_CANDIDATES = 200
HNSW_EF_SEARCH = 200
# From HNSW_LARGE_ROWS rows the walk keeps HNSW_LARGE_CANDIDATES: with the
# default graph (m = 16, ef_construction = 64) recall@10 falls as the table
# grows, and more candidates buy it back at some latency (docs/SEARCH_LATENCY.md,
# "Large stores", has the sweep and its command).
HNSW_LARGE_ROWS = 500_000
HNSW_LARGE_CANDIDATES = 800
_STORE_LOCK = 0x6E656D6F  # "nemo": the advisory lock of schema changes
_USER_LOCKS = 0x6E657573  # the namespace of per-user advisory locks


class PgStore(StoreBase):
    """One connection to one nemori store on a PostgreSQL server."""

    engine = "postgresql"
    one_write_lock = False  # a unit of work locks its user only (advisory lock per user)
    read_only = False
    path: str
    conn: PgConnection

    def __init__(self, url: str, *, create: bool = True, schema: int | None = None, read_only: bool = False):
        import psycopg
        from psycopg.rows import dict_row

        self.url = url
        self.path = shown_url(url)  # what messages name the store by, as a file's path on SQLite
        self._schema = schema
        self._reading = False
        self.read_only = read_only
        try:
            # prepare_threshold=None: no server-side prepared statements, so every query is
            # planned for its own values. psycopg prepares a query run 5 times, and PostgreSQL
            # then moves to a generic plan, blind to the values: a rare word's full-text search
            # on a large table became a scan of every row (docs/SEARCH_LATENCY.md has the
            # figures), and a user's share of a table decides the vector plan.
            raw = psycopg.connect(url, autocommit=True, row_factory=dict_row, connect_timeout=10, prepare_threshold=None)
        except psycopg.Error as e:
            raise StoreError(f"cannot connect to PostgreSQL at {self.path}: {first_line(e)}") from None
        self.conn = PgConnection(raw, self.path)
        try:
            if read_only:
                self.conn.execute("SET default_transaction_read_only = on")
                self._refuse_unusable(create=False)
            else:
                self._prepare(create)
            if self.schema_version() > max(m[0] for m in MIGRATIONS):
                raise StoreError(f"{self.path} was written by a newer nemori (schema {self.schema_version()}); upgrade nemori")
            self._register_vectors()
            if not read_only and (self._schema is None or self.schema_version() >= max(m[0] for m in MIGRATIONS)):
                self._ensure_hnsw()
        except psycopg.Error as e:
            raw.close()
            raise StoreError(f"PostgreSQL at {self.path}: {first_line(e)}") from None
        except BaseException:
            raw.close()
            raise

    def _prepare(self, create: bool) -> None:
        # One transaction under the store lock, from the extension to the newest
        # migration: another process sees no store or a whole one, never a
        # store partway made (a read-only open, such as the dry run that
        # `ingest --build auto` runs, once read `meta` before its table existed).
        # An upgrade is likewise all or nothing.
        newest = max(m[0] for m in MIGRATIONS)
        with self.transaction():
            self.conn.execute(f"SELECT pg_advisory_xact_lock({_STORE_LOCK})")
            self._refuse_unusable(create)
            self.conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            applied = self._applied()
            if applied and max(applied) > newest:
                return  # refused by the caller, with the version
            for number, name, sql in MIGRATIONS:
                if self._schema is not None and number > self._schema:
                    break
                if number in applied:
                    continue
                self.conn.execute(sql)
                self.conn.execute("INSERT INTO schema_migrations(id, name, applied_at) VALUES (?, ?, ?)", (number, name, now_iso()))

    def _refuse_unusable(self, create: bool) -> None:
        """Refuse another application's tables (never touched), and a store that is not there when it may not be made."""
        if self.scalar("SELECT to_regclass('schema_migrations') IS NOT NULL AS x"):
            return
        if self.scalar("SELECT count(*) AS n FROM pg_tables WHERE schemaname = current_schema()"):
            raise StoreError(f"{self.path} holds tables of another application (no nemori schema); use another database or schema")
        if not create:
            raise StoreError(f"no nemori store at {self.path} (--db / NEMORI_DB); run `nemori ingest` first")

    def _register_vectors(self) -> None:
        """psycopg learns pgvector's type (once the extension exists), so vectors travel in binary."""
        if self.one("SELECT 1 AS x FROM pg_type WHERE typname = 'vector'"):
            from pgvector.psycopg import register_vector

            register_vector(self.conn.raw)

    def _applied(self) -> set[int]:
        if not self.scalar("SELECT to_regclass('schema_migrations') IS NOT NULL AS x"):
            return set()
        return {r["id"] for r in self.query("SELECT id FROM schema_migrations")}

    def schema_version(self) -> int:
        applied = self._applied()
        return max(applied) if applied else 0

    # -- plumbing ---------------------------------------------------------
    @contextmanager
    def transaction(self, user: str | None = None) -> Iterator[PgConnection]:
        """All or nothing; with ``user``, after taking that user's lock (the same user's units of work take turns)."""
        import psycopg

        if self._reading:
            raise RuntimeError("a write inside SqliteStore.snapshot(): take the snapshot after the unit of work, or outside it")
        try:
            with self.conn.raw.transaction():
                if user is not None:
                    self.conn.execute(f"SELECT pg_advisory_xact_lock({_USER_LOCKS}, hashtext(?))", (user,))
                yield self.conn
        except psycopg.OperationalError as e:
            raise StoreError(f"PostgreSQL at {self.path}: {first_line(e)}; this unit of work was rolled back: rerun to resume") from None

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        if self.conn.in_transaction:
            yield
            return
        self.conn.raw.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        self._reading = True
        try:
            yield
        finally:
            self._reading = False
            self.conn.raw.execute("COMMIT")

    def checkpoint(self) -> bool:
        return True  # the server writes its log back by itself

    def close(self) -> None:
        self.conn.raw.close()

    @property
    def errors(self) -> type[Exception]:
        """What a refused statement raises (restore names the row it came from)."""
        import psycopg

        return psycopg.Error

    def ids_restored(self) -> None:
        """After rows were inserted with their own ids: each id sequence moves past the largest, so new rows do not collide."""
        for table in self.table_names():
            seq = self.one("SELECT pg_get_serial_sequence(?, 'id') AS s", (table,)) if "id" in self.columns(table) else None
            if seq and seq["s"]:
                self.conn.execute(f"SELECT setval(?, greatest((SELECT max(id) FROM {table}), 1))", (seq["s"],))

    def size_bytes(self) -> int:
        """The store's size on the server: every table of its schema with its indexes and TOAST.

        Not pg_database_size: a database may hold several stores (a schema
        each, as `nemori bench --db` makes) and always holds the catalogs.
        """
        return int(
            self.scalar(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) AS n FROM pg_class c"
                " JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = current_schema() AND c.relkind IN ('r', 'm')"
            )
        )

    # -- the embedder's vector tables (meta and the checks: store/base.py) ----
    def bind_embedder(self, identity: str, dimensions: int) -> None:
        self.check_embedder(identity)
        if self.embedder_identity() == identity:
            return
        with self.transaction():
            self.conn.execute(f"SELECT pg_advisory_xact_lock({_STORE_LOCK})")
            if self.embedder_identity() == identity:
                return  # another process bound it meanwhile
            self.check_embedder(identity)
            for table in VECTOR_TABLES:
                self.conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {table} ("
                    f" rowid BIGINT PRIMARY KEY, user_id TEXT NOT NULL, embedding vector({int(dimensions)}) NOT NULL)"
                )
                self.conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_user ON {table} (user_id)")
                self._create_hnsw(table)
            self.set_meta("embedder", identity)
        self._register_vectors()

    def _create_hnsw(self, table: str) -> None:
        self.conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table} USING hnsw (embedding vector_cosine_ops)")

    def _ensure_hnsw(self) -> None:
        """A store bound before the HNSW indexes existed gets them (built from its rows: once, under the store lock)."""
        if not self.has_vectors():
            return
        present = {r["name"] for r in self.query("SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema()")}
        missing = [t for t in VECTOR_TABLES if f"{t}_hnsw" not in present]
        if missing:
            with self.transaction():
                self.conn.execute(f"SELECT pg_advisory_xact_lock({_STORE_LOCK})")
                for table in missing:
                    self._create_hnsw(table)

    def insert_vector(self, table: str, rowid: int, user: str, embedding: bytes | np.ndarray | Sequence[float]) -> None:
        """One row's vector (float32 bytes or an array); the HNSW index takes it in as it is written."""
        blob = embedding if isinstance(embedding, bytes) else np.asarray(embedding, dtype=np.float32).tobytes()
        self.conn.execute(f"INSERT INTO {table}(rowid, user_id, embedding) VALUES (?, ?, ?)", (rowid, user, blob))

    def delete_vectors(self, table: str, ids: Iterable[int]) -> int:
        ids = [int(i) for i in ids]
        if not ids:
            return 0
        self.conn.execute(f"DELETE FROM {table} WHERE rowid = ANY(?)", (ids,))
        return self.conn.changes()

    # -- search --------------------------------------------------------------
    def vector_search(self, table: str, user: str, query: np.ndarray, k: int, within: Within | None = None) -> list[tuple[int, float]]:
        """Cosine KNN within the user's rows (pgvector's ``<=>`` is the cosine distance): HNSW on a big table, else exact."""
        blob = np.asarray(query, dtype=np.float32).tobytes()
        rows_in_table = self.estimated_rows(table) if within is None else 0
        candidates = HNSW_LARGE_CANDIDATES if rows_in_table >= HNSW_LARGE_ROWS else HNSW_CANDIDATES
        if within is None and 0 < k <= candidates and rows_in_table >= HNSW_MIN_ROWS:
            self._set_ef_search(max(HNSW_EF_SEARCH, candidates))
            # The inner query has no filter, so the planner walks the HNSW
            # graph; the user's rows are kept from its candidates.
            rows = self.query(
                f"SELECT rowid, distance FROM (SELECT rowid, user_id, embedding <=> ? AS distance FROM {table}"
                f" ORDER BY embedding <=> ? LIMIT ?) AS near WHERE user_id = ? ORDER BY distance, rowid",
                (blob, blob, candidates, user),
            )
            if len(rows) >= min(HNSW_MIN_OWN * k, candidates):
                return [(int(r["rowid"]), 1.0 - float(r["distance"])) for r in rows[:k]]
        allowed = f" AND rowid IN ({within.sql})" if within else ""
        # "+ 0": an expression the HNSW index does not answer, so this scan stays exact.
        rows = self.query(
            f"SELECT rowid, embedding <=> ? AS distance FROM {table} WHERE user_id = ?{allowed} ORDER BY (embedding <=> ?) + 0, rowid LIMIT ?",
            (blob, user, *(within.params if within else ()), blob, k),
        )
        return [(int(r["rowid"]), 1.0 - float(r["distance"])) for r in rows]

    _ef_search: int | None = None  # the connection's hnsw.ef_search, once set

    def _set_ef_search(self, value: int) -> None:
        """How many neighbours the HNSW walk keeps (pgvector's default, 40, is fewer than the candidates asked for); set when it changes."""
        if self._ef_search != value:
            self.conn.execute(f"SET hnsw.ef_search = {int(min(value, 1000))}")  # pgvector's most
            self._ef_search = value

    def estimated_rows(self, table: str) -> int:
        """PostgreSQL's estimate of a table's rows (kept by autovacuum's ANALYZE); a table never analysed is counted."""
        row = self.one("SELECT reltuples AS n FROM pg_class WHERE oid = ?::regclass", (table,))
        estimate = int(row["n"]) if row and row["n"] is not None else -1
        if estimate < 0:
            estimate = int(self.scalar(f"SELECT count(*) AS n FROM {table}"))
        return estimate

    # Full text through tsvector: words stemmed by the 'english' configuration, ranked by ts_rank_cd.
    def _match_text(self, words: list[str]) -> str:
        return _any_of(words)

    def _ranked_sql(self, fts: str, allowed: str, *, bounded: bool) -> str:
        if not bounded:
            return (
                f"SELECT rowid, ts_rank_cd(tsv, q) AS rank FROM {fts}, to_tsquery('english', ?) AS q"
                f" WHERE tsv @@ q AND user_id = ?{allowed} ORDER BY rank DESC, rowid LIMIT ?"
            )
        # The first max_rows matching rows found (in the table's order, not by rank) are ranked.
        return (
            f"SELECT rowid, ts_rank_cd(tsv, q) AS rank FROM (SELECT rowid, tsv, q FROM {fts}, to_tsquery('english', ?) AS q"
            f" WHERE tsv @@ q AND user_id = ?{allowed} LIMIT ?) AS matched ORDER BY rank DESC, rowid LIMIT ?"
        )

    def _score(self, rank: float) -> float:
        return rank  # ts_rank_cd is higher-is-better

    def doc_freq(self, fts: str, words: list[str], *, at_most: int | None = None) -> dict[str, int]:
        """How many indexed rows contain each word, counted through the GIN index.

        ``at_most``: the caller only needs to know which words are in more
        rows than that, so the planner's estimate serves instead of a count.
        Counting walks a word's whole posting list and visits every row it
        names, even with a LIMIT; the estimate comes from the lexeme statistics
        ANALYZE keeps for tsvector columns (autovacuum runs it) and costs a
        small part of that (docs/SEARCH_LATENCY.md, large stores, has both figures). It is close
        for common words, the ones callers drop, and a floor for rare ones (so
        callers bound the rows they rank anyway). A table ANALYZE has not
        reached yet is counted.
        """
        if at_most is not None and self._has_lexeme_stats(fts):
            plans = {
                w: self.one(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {fts} WHERE tsv @@ to_tsquery('english', ?)", (_any_of([w]),))
                for w in words
            }
            return {w: int(_plan_rows(plan)) for w, plan in plans.items()}
        out = {}
        for w in words:
            row = self.one(f"SELECT count(*) AS n FROM {fts} WHERE tsv @@ to_tsquery('english', ?)", (_any_of([w]),))
            out[w] = int(row["n"]) if row else 0
        return out

    def _has_lexeme_stats(self, fts: str) -> bool:
        """Whether ANALYZE has gathered the tsvector column's most common lexemes (what the planner's estimate rests on)."""
        return (
            self.one(
                "SELECT 1 AS x FROM pg_stats WHERE schemaname = current_schema() AND tablename = ? AND attname = 'tsv'"
                " AND most_common_elems IS NOT NULL",
                (fts,),
            )
            is not None
        )

    def text_contains(self, fts: str, user: str, word: str, within: Within | None = None) -> bool:
        allowed = f" AND rowid IN ({within.sql})" if within else ""
        return (
            self.one(
                f"SELECT 1 AS x FROM {fts} WHERE tsv @@ to_tsquery('english', ?) AND user_id = ?{allowed} LIMIT 1",
                (_any_of([word]), user, *(within.params if within else ())),
            )
            is not None
        )

    # -- tables and space -------------------------------------------------------
    def table_names(self) -> list[str]:
        return [
            r["name"] for r in self.query("SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename")
        ]

    def columns(self, table: str) -> list[str]:
        rows = self.query(
            "SELECT column_name AS name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?"
            " ORDER BY ordinal_position",
            (table,),
        )
        return [r["name"] for r in rows]

    # Export and restore's view of the schema (store/pg_tables.py).
    def plain_tables(self) -> list[str]:
        return self.table_names()

    def user_tables(self) -> list[TableShape]:
        return pg_tables.user_tables(self)

    def defer_foreign_keys(self) -> None:
        pg_tables.defer_foreign_keys(self)

    def dangling_reference(self) -> Dangling | None:
        return pg_tables.dangling_reference(self)

    def erase_on_delete(self) -> None:
        """Nothing to switch on: PostgreSQL frees a deleted row's space at VACUUM (docs/RELIABILITY.md says to run it)."""

    def compact_text_indexes(self) -> None:
        """Nothing to do: a GIN index drops deleted rows at VACUUM."""

    def vacuum(self) -> bool:
        for table in self.table_names():
            self.conn.execute(f'VACUUM "{table}"')  # outside a transaction: the connection is in autocommit
        return True


def _plan_rows(row: Row | None) -> float:
    """The row count the planner expects, from one row of EXPLAIN (FORMAT JSON)."""
    plan = next(iter(row.values())) if row else None
    if isinstance(plan, str):
        plan = json.loads(plan)
    return float(plan[0]["Plan"]["Plan Rows"]) if plan else 0.0


def _any_of(words: list[str]) -> str:
    """A tsquery matching any of the words; each word is letters and digits only, so nothing in it is an operator."""
    safe = [re.sub(r"\W+", " ", w).strip() for w in words]
    return " | ".join(f"'{w}'" for w in safe if w)
