"""A database from every earlier schema version opens with the current code and loses nothing (issue 17)."""

from __future__ import annotations

import apsw
import pytest

from nemori_cli.errors import StoreError
from nemori_cli.store import sqlite as db_module
from nemori_cli.store.migrations import MIGRATIONS
from nemori_cli.store.sqlite import SqliteStore

NEWEST = max(m[0] for m in MIGRATIONS)


def _old_file(path, version: int, messages: int = 25):
    """A file as nemori at schema ``version`` left it: its migrations and records, and rows in the tables of schema 1."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")
    for number, name, sql in MIGRATIONS[:version]:
        with conn:
            conn.execute(sql)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?, '2024-01-01T00:00:00+00:00')", (number, name))
    with conn:
        conn.execute(
            "INSERT INTO episodes(user_id, title, narrative, start_ts, end_ts, start_epoch, end_epoch, boundary, created_at)"
            " VALUES ('u', 'An old day', 'Ann sailed.', '2024-01-01T10:00:00', '2024-01-01T11:00:00', 1, 2, 'model', 'x')"
        )
        for i in range(messages):
            conn.execute(
                "INSERT INTO messages(user_id, msg_key, source_id, speaker, content, ts, ts_epoch, episode_id, ingested_at)"
                " VALUES ('u', ?, ?, 'Ann', ?, '2024-01-01T10:00:00', ?, ?, 'x')",
                (f"k{i}", f"D1:{i}", f"old message {i} \u00e9\u2603", 1 + i, 1 if i < 20 else None),
            )
        conn.execute(
            "INSERT INTO llm_calls(user_id, stage, model, prompt_tokens, completion_tokens, ms, attempts, outcome, created_at)"
            " VALUES ('u', 'narration', 'm', 10, 5, 1.0, 1, 'ok', 'x')"
        )
        if version >= 3:  # facts exist: schema 7 dates them by their source episode
            conn.execute("INSERT INTO facts(user_id, text, created_at) VALUES ('u', 'Ann sails.', 'x')")
            conn.execute("INSERT INTO fact_sources(fact_id, episode_id) VALUES (1, 1)")
    conn.close()


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
    _old_file(path, version)
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
    _old_file(path, NEWEST)
    before = _rows(path)
    broken = (NEWEST + 1, "a migration that fails halfway", "CREATE TABLE half_made(x); INSERT INTO no_such_table VALUES (1);")
    monkeypatch.setattr(db_module, "MIGRATIONS", [*MIGRATIONS, broken])
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
