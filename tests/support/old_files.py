"""A SQLite file as an earlier nemori left it, for the upgrade tests (tests/unit/test_upgrades.py and others)."""

from __future__ import annotations

import apsw

from nemori_cli.store.migrations import MIGRATIONS


def old_file(path, version: int, messages: int = 25):
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
