"""One user's memory as plain records: every row of every table the user owns, found by looking at the schema.

Nothing here names a table of nemori's. The engine reads its schema
(``Store.user_tables``: store/sqlite_tables.py, store/pg_tables.py), so a
column or a table added by a later migration is exported (and restored,
store/restore.py) without a change here. What is found:

- **rows**: ordinary tables. A table is the user's when it has a ``user_id``
  column, or a foreign key to a table that is the user's (fact_sources,
  note_links, note_evolutions: they are owned through facts and notes).
- **text indexes** (FTS5): their own rows, not rebuilt from the tables they
  mirror, because what is indexed is not always the row's text (episodes
  built with ``--index messages`` index the raw turns, not the narrative).
  Restoring inserts the rows and FTS5 builds its index from them.
- **vectors** (sqlite-vec vec0): rowid, partition key and the embedding as
  little-endian float32 bytes (base64), so a restore needs no embedder and
  finds exactly what the original found.

Left out, because they are derived: each virtual table's shadow tables (the
FTS5 segments, vec0's chunks), fts5vocab tables (term statistics computed
from an FTS5 table) and SQLite's own tables. ``meta`` and
``schema_migrations`` describe the whole file, not a user; the header
carries them.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from nemori_cli.errors import StoreError
from nemori_cli.store.clock import now_iso
from nemori_cli.store.contract import Store, TableShape
from nemori_cli.store.messages import PLAN_META_PREFIX

FORMAT = 1  # the export format's version: a reader refuses one it does not know


@dataclass(frozen=True)
class Table:
    """One exported table: how its rows are chosen, and what a line of it holds."""

    name: str
    kind: str  # rows | text | vectors
    columns: tuple[str, ...]
    owner: str  # SQL condition choosing the user's rows (parameter :user)
    rowid: bool  # the hidden rowid goes with each row: nothing else names the row (FTS5, vec0, a table without an integer key)
    order: str  # ORDER BY clause, or "" for the table's own scan order

    @property
    def quoted(self) -> str:
        return _q(self.name)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def tables(db: Store) -> list[Table]:
    """Every table that holds a user's rows, ordinary tables first (in the order they were created), then indexes, then vectors.

    The engine says what its tables are (``Store.user_tables``); whose rows
    each holds is decided here, alike for every engine.
    """
    pending = db.user_tables()
    found: dict[str, Table] = {}
    # A table owned through a foreign key is the user's once its parent is: repeat until nothing new is found.
    while pending:
        progress = False
        for shape in list(pending):
            owner = _owner(shape, found)
            if owner is not None:
                found[shape.name] = Table(shape.name, shape.kind, shape.columns, owner, shape.rowid, shape.order)
                pending.remove(shape)
                progress = True
        if not progress:
            # A table that no user owns would be lost by an export without a word; refuse instead (tests/unit/test_export.py checks the schema has none).
            raise StoreError(
                f"cannot tell whose rows table {', '.join(s.name for s in pending)} holds (no user_id column, no foreign key to a user's table); export would lose it"
            )
    rank = {"rows": 0, "text": 1, "vectors": 2}
    return sorted(found.values(), key=lambda t: rank[t.kind])  # stable: creation order within a kind


def _owner(shape: TableShape, owned: dict[str, Table]) -> str | None:
    """The SQL condition choosing the user's rows of ``shape``, or None while none of its parents is known to be the user's."""
    if "user_id" in shape.columns:
        return '"user_id" = :user'
    parents = [
        f"{_q(column)} IN (SELECT {_q(key)} FROM {owned[parent].quoted} WHERE {owned[parent].owner})"
        for column, parent, key in shape.references
        if parent in owned
    ]
    return "(" + " OR ".join(parents) + ")" if parents else None


def encode(value: Any) -> Any:
    """A column value as JSON: a BLOB (a vector) as {"base64": ...}; every other SQLite value is already JSON."""
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    return value


def rows(db: Store, user: str, table: Table) -> Iterator[dict[str, Any]]:
    """The user's rows of one table as export records: {"table", ["rowid"], "row"}."""
    select = ", ".join(_q(c) for c in table.columns)
    if table.rowid:
        select = f"rowid AS {_q('rowid')}, " + select
    sql = f"SELECT {select} FROM {table.quoted} WHERE {table.owner} {table.order}"
    for r in db.conn.execute(sql, {"user": user}):
        record: dict[str, Any] = {"table": table.name}
        if table.rowid:
            record["rowid"] = r.pop("rowid")
        record["row"] = {k: encode(v) for k, v in r.items()}
        yield record


def meta(db: Store) -> dict[str, str]:
    """The file-level settings (embedder, profile, ...); a part-way build's window cut is not one (store/messages.PLAN_META_PREFIX)."""
    return {r["key"]: r["value"] for r in db.query("SELECT key, value FROM meta ORDER BY key") if not r["key"].startswith(PLAN_META_PREFIX)}


def users(db: Store) -> list[str]:
    """Every user with a row in any table that has a user column."""
    found: set[str] = set()
    for t in tables(db):
        if t.kind == "rows" and t.owner == '"user_id" = :user':  # the indexes mirror these rows
            found.update(r["u"] for r in db.query(f"SELECT DISTINCT user_id AS u FROM {t.quoted}"))
    return sorted(found)


def stream(db: Store, user: str, header: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """The whole export as records: the header, every row, and a closing record with the counts (a reader knows the file is whole).

    One snapshot throughout, so an ingest committing meanwhile is either all
    in the export or not in it at all.
    """
    with db.snapshot():
        chosen = tables(db)
        if user not in users(db):
            others = ", ".join(users(db)) or "none"
            raise StoreError(f"nothing stored for user {user} in {db.path} (users there: {others})")
        yield {
            "nemori_export": FORMAT,
            "schema": db.schema_version(),
            "user": user,
            "exported_at": now_iso(),
            **(header or {}),
            "meta": meta(db),
        }
        counts: dict[str, int] = {}
        for table in chosen:
            n = 0
            for record in rows(db, user, table):
                n += 1
                yield record
            counts[table.name] = n
        yield {"nemori_export_end": True, "rows": counts}
