"""A SQLite file's vector tables: one vec0 table per kind, each with a quantised copy of sign bits kept in step.

The copy (``{table}_bits``) holds the sign bits to scan and the float vector
beside them (an auxiliary column, a rowid lookup) to rescore the candidates;
store/sqlite_vectors.py searches it. Its name starts with the float table's,
so export skips it as that table's storage; it is rebuilt from the float
table when out of step. Sign bits pack eight to a byte: a width that is not a
multiple of 8 keeps the exact scan only.
"""

from __future__ import annotations

from collections.abc import Iterable

from nemori_cli.store.contract import Connection, Store
from nemori_cli.store.index import VECTOR_TABLES


def create(conn: Connection, dimensions: int) -> None:
    """Every kind's vector table for vectors of this width, and its quantised copy where the width allows one (if not there yet)."""
    for table in VECTOR_TABLES:
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING vec0("
            f" user_id TEXT PARTITION KEY,"
            f" embedding float[{int(dimensions)}] distance_metric=cosine)"
        )
        if int(dimensions) % 8:
            continue
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {table}_bits USING vec0("
            f" user_id TEXT PARTITION KEY, embedding bit[{int(dimensions)}], +vector BLOB)"
        )


def ensure(db: Store) -> None:
    """A file bound before a newer vector table existed gets it now; a quantised table out of step with its float one is rebuilt."""
    identity = db.embedder_identity()
    if identity is None:
        return
    dimensions = int(identity.rsplit(":", 1)[1])
    existing = {r["name"] for r in db.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
    wanted = set(VECTOR_TABLES) | ({f"{t}_bits" for t in VECTOR_TABLES} if dimensions % 8 == 0 else set())
    stale = [t for t in VECTOR_TABLES if f"{t}_bits" in existing and _rows(db, t) != _rows(db, f"{t}_bits")]
    if not wanted <= existing or stale:
        with db.transaction():
            create(db.conn, dimensions)
            for table in VECTOR_TABLES:
                if dimensions % 8 == 0 and (f"{table}_bits" not in existing or table in stale):
                    fill_bits(db.conn, table)


def _rows(db: Store, table: str) -> int:
    """How many vectors a vec0 table holds (from its rowid map, a plain B-tree count)."""
    return int(db.scalar(f'SELECT count(*) AS n FROM "{table}_rowids"'))


def fill_bits(conn: Connection, table: str) -> None:
    """(Re)build a quantised table from its float table (a file of an older nemori, or restored from an export)."""
    conn.execute(f"DELETE FROM {table}_bits")
    conn.execute(
        f"INSERT INTO {table}_bits(rowid, user_id, embedding, vector)"
        f" SELECT rowid, user_id, vec_quantize_binary(embedding), embedding FROM {table}"
    )


def bits_tables(db: Store) -> set[str]:
    """The quantised tables this file has."""
    return {r["name"] for r in db.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%\\_bits' ESCAPE '\\'")}


def insert(conn: Connection, table: str, rowid: int, user: str, blob: bytes, *, bits: bool) -> None:
    """One row's vector (float32 bytes), into the float table and (``bits``) its quantised copy."""
    conn.execute(f"INSERT INTO {table}(rowid, user_id, embedding) VALUES (?, ?, ?)", (rowid, user, blob))
    if not bits:
        return
    conn.execute(
        f"INSERT INTO {table}_bits(rowid, user_id, embedding, vector) VALUES (?, ?, vec_quantize_binary(?), ?)",
        (rowid, user, blob, blob),
    )


def delete(conn: Connection, table: str, ids: Iterable[int], *, bits: bool) -> int:
    """Drop rows' vectors from the float table and (``bits``) its quantised copy (one at a time: vec0 point lookups); how many float rows went."""
    ids = list(ids)
    before = conn.total_changes()
    conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(i,) for i in ids])
    gone = conn.total_changes() - before
    if bits:
        conn.executemany(f"DELETE FROM {table}_bits WHERE rowid = ?", [(i,) for i in ids])
    return gone
