"""The connection of the PostgreSQL engine: apsw's connection surface, as store/contract.Connection names it, over psycopg.

The store modules write SQLite's SQL and read rows as dicts; this adapter
rewrites each statement (store/pg_dialect.py), converts values both ways
(vectors as float32 bytes, sums as numbers), and keeps SQLite's change
counters. It holds no engine logic: transactions, locks and search are
store/pg.py's.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from nemori_cli.errors import StoreError
from nemori_cli.store.contract import Params, Row
from nemori_cli.store.pg_dialect import named, translate

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import DictRow


def _value(v: Any) -> Any:
    """A value from PostgreSQL as SQLite would have given it: sums are numbers, vectors are float32 bytes."""
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, np.ndarray):
        return np.asarray(v, dtype=np.float32).tobytes()
    if hasattr(v, "to_numpy"):  # pgvector's Vector
        return np.asarray(v.to_numpy(), dtype=np.float32).tobytes()
    return v


def _param(v: Any) -> Any:
    """A parameter as PostgreSQL takes it: the store's only BLOBs are float32 vectors, numpy scalars are Python numbers."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        from pgvector import Vector

        return Vector(np.frombuffer(bytes(v), dtype=np.float32))
    if isinstance(v, np.generic):
        return v.item()
    return v


def _params(params: Params) -> dict[str, Any] | tuple[Any, ...]:
    if isinstance(params, dict):
        return {k: _param(v) for k, v in params.items()}
    return tuple(_param(v) for v in params)


class PgConnection:
    """The connection surface the store modules use (apsw's, in the part they need), over psycopg."""

    def __init__(self, raw: psycopg.Connection[DictRow], name: str):
        self.raw, self.name = raw, name
        self._changes = 0
        self._total = 0

    def _run(self, sql: str, params: Params = ()) -> psycopg.Cursor[DictRow]:
        import psycopg

        text, parameterised = translate(sql)
        if isinstance(params, dict) and params:  # apsw's :name parameters (export's queries)
            text, parameterised = named(sql), True
        try:
            cur = self.raw.execute(text, _params(params) if parameterised else None)
        except psycopg.OperationalError as e:
            raise StoreError(f"PostgreSQL at {self.name}: {first_line(e)}; this unit of work was rolled back: rerun to resume") from None
        self._changes = max(cur.rowcount, 0)
        self._total += self._changes
        return cur

    def execute(self, sql: str, params: Params = ()) -> list[Row]:
        cur = self._run(sql, params)
        if cur.description is None:
            return []
        return [{k: _value(v) for k, v in row.items()} for row in cur.fetchall()]

    def executemany(self, sql: str, seq: Iterable[Params]) -> None:
        for params in seq:  # psycopg's executemany pipelines; one by one keeps changes() and errors per row simple
            self._run(sql, params)

    def last_insert_rowid(self) -> int:
        row = self.raw.execute("SELECT lastval() AS v").fetchone()
        assert row is not None  # a SELECT without FROM answers one row (lastval() raises when nothing was inserted)
        return int(row["v"])

    def changes(self) -> int:
        return self._changes

    def total_changes(self) -> int:
        return self._total

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return self.raw.info.transaction_status != TransactionStatus.IDLE


def first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
