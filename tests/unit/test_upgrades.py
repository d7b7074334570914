"""A database from every earlier schema version opens with the current code and loses nothing (issue 17)."""

from __future__ import annotations

import apsw
import pytest

from nemori_cli.errors import StoreError
from nemori_cli.store import sqlite_migrate
from nemori_cli.store.migrations import MIGRATIONS
from nemori_cli.store.sqlite import SqliteStore
from tests.support.old_files import old_file

NEWEST = max(m[0] for m in MIGRATIONS)


def _rows(path) -> list[tuple]:
    conn = apsw.Connection(str(path))
    try:
        return (
            conn.execute("SELECT msg_key, content, episode_id FROM messages ORDER BY id").fetchall()
            + conn.execute("SELECT title, narrative, status FROM episodes ORDER BY id").fetchall()
            + conn.execute("SELECT stage, prompt_tokens FROM llm_calls").fetchall()
            + _facts(conn)
        )
    finally:
        conn.close()


def _facts(conn) -> list[tuple]:
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'facts'").fetchall():
        return []
    return conn.execute("SELECT text, status FROM facts ORDER BY id").fetchall()


@pytest.mark.parametrize("version", range(1, NEWEST))
def test_every_earlier_schema_upgrades_in_place_and_loses_no_row(tmp_path, version):
    path = tmp_path / f"v{version}.db"
    old_file(path, version)
    before = _rows(path)
    db = SqliteStore(path, create=False)
    assert db.schema_version() == NEWEST
    if 3 <= version < 7:  # schema 7's backfill: the fact is valid from its episode's end, in conversation time
        assert db.one("SELECT episode_id, valid_from, valid_until FROM facts") == {
            "episode_id": 1,
            "valid_from": "2024-01-01T11:00:00",
            "valid_until": None,
        }
    db.close()
    assert _rows(path) == before and len(before) == 25 + 1 + 1 + (version >= 3)


def test_a_failing_migration_leaves_the_file_at_the_version_before(tmp_path, monkeypatch):
    path = tmp_path / "m.db"
    old_file(path, NEWEST)
    before = _rows(path)
    broken = (NEWEST + 1, "a migration that fails halfway", "CREATE TABLE half_made(x); INSERT INTO no_such_table VALUES (1);")
    monkeypatch.setattr(sqlite_migrate, "MIGRATIONS", [*MIGRATIONS, broken])
    with pytest.raises(StoreError, match=f"unchanged at schema {NEWEST}"):
        SqliteStore(path, create=False)
    conn = apsw.Connection(str(path))
    assert conn.execute("SELECT max(id) FROM schema_migrations").fetchall()[0][0] == NEWEST
    assert not conn.execute("SELECT name FROM sqlite_master WHERE name = 'half_made'").fetchall()
    conn.close()
    assert _rows(path) == before


def test_a_file_from_a_newer_nemori_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "new.db"
    SqliteStore(path).close()
    conn = apsw.Connection(str(path))
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'from the future', 'x')", (NEWEST + 1,))
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="newer nemori"):
        SqliteStore(path, create=False)
    assert path.read_bytes() == before
