"""What a PostgreSQL store's schema says about its tables, for export and restore: read from the catalogue.

The shapes are those a SQLite file of the same schema gives (the full-text
and vector tables keep the row id in a ``rowid`` column; the generated
``tsv`` column is left out), so an export moves a user's memory between the
engines either way.
"""

from __future__ import annotations

from nemori_cli.store.contract import Dangling, Store, TableShape
from nemori_cli.store.index import TEXT_TABLES, VECTOR_TABLES

FILE_LEVEL = ("meta", "schema_migrations")  # in an export's header, not rows


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def user_tables(db: Store) -> list[TableShape]:
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
    shapes = []
    for name in names:
        columns = tuple(
            r["name"]
            for r in db.query(
                "SELECT column_name AS name FROM information_schema.columns WHERE table_schema = current_schema()"
                " AND table_name = ? AND is_generated = 'NEVER' ORDER BY ordinal_position",
                (name,),
            )
        )
        references = tuple((f["col"], f["parent"], f["pcol"]) for f in fks if f["child"] == name)
        if name in TEXT_TABLES or name in VECTOR_TABLES:
            kind = "text" if name in TEXT_TABLES else "vectors"
            shapes.append(TableShape(name, kind, tuple(c for c in columns if c != "rowid"), references, rowid=True, order="ORDER BY rowid"))
            continue
        keys = db.query(
            "SELECT a.attname AS name FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
            " WHERE i.indrelid = ?::regclass AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)",
            (name,),
        )
        order = "ORDER BY " + ", ".join(_q(k["name"]) for k in keys) if keys else ""
        shapes.append(TableShape(name, "rows", columns, references, rowid=False, order=order))
    return shapes


def defer_foreign_keys(db: Store) -> None:
    db.conn.execute("SET CONSTRAINTS ALL DEFERRED")


def dangling_reference(db: Store) -> Dangling | None:
    try:
        db.conn.execute("SET CONSTRAINTS ALL IMMEDIATE")  # every deferred reference checked now
    except db.errors as e:
        return Dangling(str(e).splitlines()[0])
    return None
