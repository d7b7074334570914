"""What every store engine offers: the contract the rest of nemori is written against.

Two engines implement it: SQLite (store/sqlite.py, the default: one file) and
PostgreSQL (store/pg.py, a server). Everything above the store annotates with
``Store`` and never names an engine, so a third engine (DuckDB, libSQL, ...)
is a new module that satisfies these two Protocols, plus a branch in
store/engines.open_store; tests/unit/test_store_contract.py checks that each
engine class has every member.

The SQL a store module writes is SQLite's dialect; an engine that speaks
another rewrites it (PostgreSQL: store/pg_dialect.py). What SQL cannot say
alike (vector and full-text search, the schema, reclaiming space) is a method
of the engine, listed here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from nemori_cli.store.asof import Within

Params = Sequence[Any] | dict[str, Any]
Row = dict[str, Any]


@dataclass(frozen=True)
class TableShape:
    """A table that holds users' rows, as export and restore (store/export.py, store/restore.py) read it from the engine."""

    name: str
    kind: str  # rows | text (a full-text index's own rows) | vectors
    columns: tuple[str, ...]  # what a line of the export holds (not the row id, not a generated column)
    references: tuple[tuple[str, str, str], ...]  # foreign keys: (column, parent table, parent column; "rowid" where it names none)
    rowid: bool  # the hidden rowid goes with each row: nothing else names the row (FTS5, vec0, a table without an integer key)
    order: str  # ORDER BY clause, or "" for the table's own scan order


@dataclass(frozen=True)
class Dangling:
    """A reference to a row that is not there, found when the deferred foreign keys are checked."""

    detail: str  # what the engine said, or which row it names
    table: str | None = None  # the row that refers (None: the engine does not say which)
    rowid: int | None = None
    parent: str | None = None  # the table it refers to


class Connection(Protocol):
    """The part of a connection the store modules use: apsw's names, rows as dicts."""

    def execute(self, sql: str, params: Params = ...) -> Iterable[Row]: ...

    def executemany(self, sql: str, seq: Iterable[Params]) -> Any: ...

    def last_insert_rowid(self) -> int: ...

    def changes(self) -> int: ...

    def total_changes(self) -> int: ...

    @property
    def in_transaction(self) -> bool: ...


class Store(Protocol):
    """One open store: rows, transactions, vectors and full-text search for every user in it."""

    # Read-only here, so that each engine may narrow them (SQLite: a Path and apsw's connection).
    @property
    def engine(self) -> str:
        """ "sqlite" | "postgresql"."""
        ...

    @property
    def path(self) -> Path | str:
        """What messages name the store by: the file's path, or the server's URL without its password."""
        ...

    @property
    def conn(self) -> Connection: ...

    @property
    def errors(self) -> type[Exception]:
        """What the engine's driver raises for a statement it refuses (a constraint, a type)."""
        ...

    @property
    def one_write_lock(self) -> bool:
        """Whether all writers share one lock (SQLite: one per file), rather than one per user (PostgreSQL)."""
        ...

    @property
    def read_only(self) -> bool:
        """Whether this store was opened for reading only (a dry run; a read of a file in a read-only folder): writes fail."""
        ...

    # -- rows and meta (store/base.py: the same SQL on every engine) --------------
    def query(self, sql: str, params: Params = ()) -> list[Row]: ...

    def one(self, sql: str, params: Params = ()) -> Row | None: ...

    def scalar(self, sql: str, params: Params = ()) -> Any: ...

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def delete_meta(self, key: str) -> None: ...

    def embedder_identity(self) -> str | None: ...

    def check_embedder(self, identity: str) -> None: ...

    def has_vectors(self) -> bool: ...

    # -- units of work -------------------------------------------------------------
    def transaction(self, user: str | None = None) -> AbstractContextManager[Connection]:
        """All or nothing; nested, a savepoint. ``user``: whose unit of work (PostgreSQL locks per user)."""
        ...

    def snapshot(self) -> AbstractContextManager[None]:
        """Several reads that see one state of the store; a write inside is refused."""
        ...

    def checkpoint(self) -> bool: ...

    def close(self) -> None: ...

    def ids_restored(self) -> None:
        """Rows were copied in with their ids: the next id of each table moves past them."""
        ...

    def size_bytes(self) -> int: ...

    def schema_version(self) -> int: ...

    # -- vectors -----------------------------------------------------------------
    def bind_embedder(self, identity: str, dimensions: int) -> None: ...

    def insert_vector(self, table: str, rowid: int, user: str, embedding: np.ndarray | Sequence[float]) -> None: ...

    def delete_vectors(self, table: str, ids: Iterable[int]) -> int: ...

    def vector_search(self, table: str, user: str, query: np.ndarray, k: int, within: Within | None = None) -> list[tuple[int, float]]: ...

    def estimated_rows(self, table: str) -> int: ...

    # -- full text ---------------------------------------------------------------
    def text_search(
        self, fts: str, user: str, words: list[str], k: int, within: Within | None = None, max_rows: int | None = None
    ) -> list[tuple[int, float]]:
        """(row id, score where higher is better) of rows holding any of ``words``, best first."""
        ...

    def doc_freq(self, fts: str, words: list[str], *, at_most: int | None = None) -> dict[str, int]: ...

    def text_contains(self, fts: str, user: str, word: str, within: Within | None = None) -> bool: ...

    # -- schema and space ----------------------------------------------------------
    def table_names(self) -> list[str]: ...

    def plain_tables(self) -> list[str]:
        """The tables that hold rows themselves: not an index's virtual table (SQLite's FTS5, vec0), by name."""
        ...

    def user_tables(self) -> list[TableShape]:
        """Every table that holds users' rows, in the order they were created; not the file-level tables
        (``meta``, ``schema_migrations``), nor what is derived (an index's storage). Refuses (StoreError) a kind
        of table export cannot copy."""
        ...

    def defer_foreign_keys(self) -> None:
        """In this unit of work, references are checked at its end (or by ``dangling_reference``), not row by row."""
        ...

    def dangling_reference(self) -> Dangling | None:
        """The first deferred reference to a row that is not there, or None."""
        ...

    def columns(self, table: str) -> list[str]: ...

    def erase_on_delete(self) -> None: ...

    def compact_text_indexes(self) -> None: ...

    def vacuum(self) -> bool: ...


def members(protocol: type) -> set[str]:
    """The names a Protocol asks for (its methods and attributes), for the contract test."""
    names = {n for n in vars(protocol) if not n.startswith("_")} | set(getattr(protocol, "__annotations__", {}))
    return names - {"members"}


__all__ = ["Connection", "Dangling", "Params", "Row", "Store", "TableShape", "members"]
