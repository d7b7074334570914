"""One user's memory as plain records: every row of every table the user owns, found by looking at the schema.

Nothing here names a table of nemori's. The tables are read from
sqlite_master and their columns from PRAGMA table_info, so a column or a
table added by a later migration is exported (and restored, store/restore.py)
without a change here. What is found:

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
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from nemori_cli.errors import StoreError
from nemori_cli.store.contract import Store
from nemori_cli.store.messages import PLAN_META_PREFIX
from nemori_cli.store.sqlite import now_iso

FORMAT = 1  # the export format's version: a reader refuses one it does not know
FILE_LEVEL = ("meta", "schema_migrations")  # in the header, not rows
_DERIVED_MODULES = ("fts5vocab",)  # computed from another table on every read
_MODULES = {"fts5": "text", "vec0": "vectors"}  # the virtual tables whose rows are exported
_VIRTUAL = re.compile(r"^\s*CREATE\s+VIRTUAL\s+TABLE\s+.*?\bUSING\s+(\w+)", re.IGNORECASE | re.DOTALL)
_NO_ROWID = re.compile(r"\)\s*WITHOUT\s+ROWID\s*;?\s*$", re.IGNORECASE)


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
    """Every table that holds a user's rows, ordinary tables first (in the order they were created), then indexes, then vectors."""
    if db.engine == "postgresql":
        return _pg_tables(db)
    master = db.query("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY rowid")
    virtual = {r["name"]: m.group(1).lower() for r in master if (m := _VIRTUAL.match(r["sql"] or ""))}
    shadows = _shadow_tables(db, list(virtual))
    found: dict[str, Table] = {}
    unowned: list[str] = []
    pending = [r for r in master if not _skipped(r["name"], virtual, shadows)]
    for r in pending:
        module = virtual.get(r["name"])
        if module is not None and module not in _MODULES:
            raise StoreError(f"table {r['name']} is a {module} virtual table, which export does not know how to copy")
    # A table owned through a foreign key is the user's once its parent is: repeat until nothing new is found.
    while pending:
        progress = False
        for r in list(pending):
            table = _table(db, r["name"], r["sql"] or "", virtual.get(r["name"]), found)
            if table is not None:
                found[r["name"]] = table
                pending.remove(r)
                progress = True
        if not progress:
            unowned = [r["name"] for r in pending]
            break
    if unowned:
        # A table that no user owns would be lost by an export without a word; refuse instead (tests/unit/test_export.py checks the schema has none).
        raise StoreError(
            f"cannot tell whose rows table {', '.join(unowned)} holds (no user_id column, no foreign key to a user's table); export would lose it"
        )
    rank = {"rows": 0, "text": 1, "vectors": 2}
    return sorted(found.values(), key=lambda t: rank[t.kind])  # stable: creation order within a kind


def _skipped(name: str, virtual: dict[str, str], shadows: set[str]) -> bool:
    return (
        name.startswith("sqlite_")
        or name in FILE_LEVEL
        or name in shadows
        or virtual.get(name) in _DERIVED_MODULES
        or (
            name.endswith("_bits") and virtual.get(name) == "vec0" and name[: -len("_bits")] in virtual
        )  # a vector table's quantised copy: rebuilt from it on open
    )


def _shadow_tables(db: Store, virtual: list[str]) -> set[str]:
    """A virtual table's storage: what SQLite calls shadow tables, and (for a module that does not say) any table named after it."""
    names = {r["name"] for r in db.query("SELECT name FROM pragma_table_list WHERE type = 'shadow'")}
    others = [r["name"] for r in db.query("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return names | {n for n in others for v in virtual if n.startswith(v + "_") and n not in virtual}


def _table(db: Store, name: str, sql: str, module: str | None, owned: dict[str, Table]) -> Table | None:
    info = db.query("SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid", (name,))
    columns = tuple(c["name"] for c in info)
    owner = _owner(db, name, columns, owned)
    if owner is None:
        return None
    if module is not None:
        # vec0 is read in its own order: re-inserting in that order puts the vectors in the same places, so ties rank alike.
        return Table(name, _MODULES[module], columns, owner, rowid=True, order="ORDER BY rowid" if module == "fts5" else "")
    keys = [c for c in info if c["pk"]]
    if _NO_ROWID.search(sql):
        order = "ORDER BY " + ", ".join(_q(c["name"]) for c in sorted(keys, key=lambda c: c["pk"]))
        return Table(name, "rows", columns, owner, rowid=False, order=order)
    aliased = len(keys) == 1 and keys[0]["type"].upper() == "INTEGER"  # an INTEGER PRIMARY KEY is the rowid itself
    return Table(name, "rows", columns, owner, rowid=not aliased, order="ORDER BY rowid")


def _owner(db: Store, name: str, columns: tuple[str, ...], owned: dict[str, Table]) -> str | None:
    if "user_id" in columns:
        return '"user_id" = :user'
    parents = [
        f"{_q(fk['from'])} IN (SELECT {_q(fk['to'] or 'rowid')} FROM {owned[fk['table']].quoted} WHERE {owned[fk['table']].owner})"
        for fk in db.query('SELECT "table", "from", "to" FROM pragma_foreign_key_list(?) ORDER BY id, seq', (name,))
        if fk["table"] in owned
    ]
    return "(" + " OR ".join(parents) + ")" if parents else None


def _pg_tables(db: Store) -> list[Table]:
    """The same records from a PostgreSQL store: its full-text and vector tables keep the row id in a ``rowid`` column.

    The records are those a SQLite file of the same schema exports (the
    generated ``tsv`` column is left out), so an export moves a user's memory
    between the engines either way.
    """
    from nemori_cli.store.pg import TEXT_TABLES, VECTOR_TABLES

    names = [
        r["name"]
        for r in db.query(
            "SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY c.oid"
        )
        if r["name"] not in FILE_LEVEL
    ]
    fks = db.query(
        "SELECT cl.relname AS child, a.attname AS col, pcl.relname AS parent, pa.attname AS pcol"
        " FROM pg_constraint k JOIN pg_class cl ON cl.oid = k.conrelid JOIN pg_class pcl ON pcl.oid = k.confrelid"
        " JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1]"
        " JOIN pg_attribute pa ON pa.attrelid = k.confrelid AND pa.attnum = k.confkey[1]"
        " WHERE k.contype = 'f' AND cl.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
    )
    found: dict[str, Table] = {}
    pending = list(names)
    while pending:
        progress = False
        for name in list(pending):
            columns = tuple(
                r["name"]
                for r in db.query(
                    "SELECT column_name AS name FROM information_schema.columns WHERE table_schema = current_schema()"
                    " AND table_name = ? AND is_generated = 'NEVER' ORDER BY ordinal_position",
                    (name,),
                )
            )
            if "user_id" in columns:
                owner: str | None = '"user_id" = :user'
            else:
                parents = [
                    f"{_q(f['col'])} IN (SELECT {_q(f['pcol'])} FROM {found[f['parent']].quoted} WHERE {found[f['parent']].owner})"
                    for f in fks
                    if f["child"] == name and f["parent"] in found
                ]
                owner = "(" + " OR ".join(parents) + ")" if parents else None
            if owner is None:
                continue
            if name in TEXT_TABLES or name in VECTOR_TABLES:
                kind = "text" if name in TEXT_TABLES else "vectors"
                found[name] = Table(name, kind, tuple(c for c in columns if c != "rowid"), owner, rowid=True, order="ORDER BY rowid")
            else:
                keys = db.query(
                    "SELECT a.attname AS name FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
                    " WHERE i.indrelid = ?::regclass AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)",
                    (name,),
                )
                order = "ORDER BY " + ", ".join(_q(k["name"]) for k in keys) if keys else ""
                found[name] = Table(name, "rows", columns, owner, rowid=False, order=order)
            pending.remove(name)
            progress = True
        if not progress:
            raise StoreError(
                f"cannot tell whose rows table {', '.join(pending)} holds (no user_id column, no foreign key to a user's table); export would lose it"
            )
    rank = {"rows": 0, "text": 1, "vectors": 2}
    return sorted(found.values(), key=lambda t: rank[t.kind])


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
