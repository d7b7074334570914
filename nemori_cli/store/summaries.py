"""SQL for the running summaries (memory mode `summary`): every version kept, a row each."""

from __future__ import annotations

from nemori_cli.store.db import Database, now_iso


def history(db: Database, user: str) -> list[dict]:
    """Every version of the user's running summary, oldest first: id, text, episode_id, created_at."""
    return db.query("SELECT id, text, episode_id, created_at FROM summaries WHERE user_id = ? ORDER BY id", (user,))


def latest(db: Database, user: str) -> tuple[int, str] | None:
    """(version id, text) of the newest summary, or None before the first episode."""
    row = db.one("SELECT id, text FROM summaries WHERE user_id = ? ORDER BY id DESC LIMIT 1", (user,))
    return (int(row["id"]), row["text"]) if row else None


def add(db: Database, user: str, text: str, episode_id: int) -> None:
    """A new version, made when ``episode_id`` was folded in (caller holds the transaction)."""
    db.conn.execute("INSERT INTO summaries(user_id, text, episode_id, created_at) VALUES (?, ?, ?, ?)", (user, text, episode_id, now_iso()))
