"""What a SQLite file's schema says about its tables, for export and restore: read from sqlite_master and the pragmas.

Left out as derived: each virtual table's shadow tables (the FTS5 segments,
vec0's chunks), fts5vocab tables (term statistics computed from an FTS5
table), a vector table's quantised copy (rebuilt from it on open) and
SQLite's own tables; and the file-level tables, which the export's header
carries.
"""

from __future__ import annotations

import re

from nemori_cli.errors import StoreError
from nemori_cli.store.contract import Dangling, Store, TableShape

FILE_LEVEL = ("meta", "schema_migrations")  # in an export's header, not rows
_DERIVED_MODULES = ("fts5vocab",)  # computed from another table on every read
_MODULES = {"fts5": "text", "vec0": "vectors"}  # the virtual tables whose rows are exported
_VIRTUAL = re.compile(r"^\s*CREATE\s+VIRTUAL\s+TABLE\s+.*?\bUSING\s+(\w+)", re.IGNORECASE | re.DOTALL)
_NO_ROWID = re.compile(r"\)\s*WITHOUT\s+ROWID\s*;?\s*$", re.IGNORECASE)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def plain_tables(db: Store) -> list[str]:
    return [r["name"] for r in db.query("SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'")]


def user_tables(db: Store) -> list[TableShape]:
    master = db.query("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY rowid")
    virtual = {r["name"]: m.group(1).lower() for r in master if (m := _VIRTUAL.match(r["sql"] or ""))}
    shadows = _shadow_tables(db, list(virtual))
    kept = [r for r in master if not _skipped(r["name"], virtual, shadows)]
    for r in kept:
        module = virtual.get(r["name"])
        if module is not None and module not in _MODULES:
            raise StoreError(f"table {r['name']} is a {module} virtual table, which export does not know how to copy")
    return [_shape(db, r["name"], r["sql"] or "", virtual.get(r["name"])) for r in kept]


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


def _shape(db: Store, name: str, sql: str, module: str | None) -> TableShape:
    info = db.query("SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid", (name,))
    columns = tuple(c["name"] for c in info)
    references = tuple(
        (fk["from"], fk["table"], fk["to"] or "rowid")
        for fk in db.query('SELECT "table", "from", "to" FROM pragma_foreign_key_list(?) ORDER BY id, seq', (name,))
    )
    if module is not None:
        # vec0 is read in its own order: re-inserting in that order puts the vectors in the same places, so ties rank alike.
        return TableShape(name, _MODULES[module], columns, references, rowid=True, order="ORDER BY rowid" if module == "fts5" else "")
    keys = [c for c in info if c["pk"]]
    if _NO_ROWID.search(sql):
        order = "ORDER BY " + ", ".join(_q(c["name"]) for c in sorted(keys, key=lambda c: c["pk"]))
        return TableShape(name, "rows", columns, references, rowid=False, order=order)
    aliased = len(keys) == 1 and keys[0]["type"].upper() == "INTEGER"  # an INTEGER PRIMARY KEY is the rowid itself
    return TableShape(name, "rows", columns, references, rowid=not aliased, order="ORDER BY rowid")


def defer_foreign_keys(db: Store) -> None:
    db.conn.execute("PRAGMA defer_foreign_keys = ON")


def dangling_reference(db: Store) -> Dangling | None:
    for r in db.query("PRAGMA foreign_key_check"):
        return Dangling(f"a row of {r['table']} refers to a row of {r['parent']}", r["table"], r["rowid"], r["parent"])
    return None
