"""Bringing a SQLite file to the schema this nemori knows (store/migrations.py), each migration with its record in one unit of work."""

from __future__ import annotations

import apsw

from nemori_cli.errors import StoreError
from nemori_cli.store.clock import now_iso
from nemori_cli.store.contract import Store
from nemori_cli.store.migrations import MIGRATIONS


def migrate(db: Store, schema: int | None = None) -> None:
    """Apply the migrations this file lacks (``schema``: only up to that number); an up-to-date file is only read."""
    newest_known = max(m[0] for m in MIGRATIONS)
    wanted = [m for m in MIGRATIONS if schema is None or m[0] <= schema]
    if applied(db) and max(applied(db)) >= newest_known:
        if max(applied(db)) > newest_known:
            raise StoreError(f"{db.path} was written by a newer nemori (schema {max(applied(db))}); upgrade nemori")
        return
    with db.transaction():
        db.conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ( id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
    for number, name, sql in wanted:
        try:
            with db.transaction():  # the migration and its record, together; read again under the lock (another process may have run it)
                if number in applied(db):
                    continue
                db.conn.execute(sql)
                db.conn.execute(
                    "INSERT INTO schema_migrations(id, name, applied_at) VALUES (?, ?, ?)",
                    (number, name, now_iso()),
                )
        except (apsw.SQLError, apsw.ConstraintError) as e:
            raise StoreError(
                f"{db.path}: upgrading to schema {number} ({name}) failed ({e}); the file is unchanged at schema {number - 1}"
            ) from None


def applied(db: Store) -> set[int]:
    exists = db.one("SELECT 1 AS x FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'")
    return {r["id"] for r in db.query("SELECT id FROM schema_migrations")} if exists else set()
