"""SQL for the running summaries (memory mode `summary`): every version kept, a row each."""

from __future__ import annotations

from datetime import datetime

from nemori_cli.store import asof
from nemori_cli.store.clock import now_iso
from nemori_cli.store.contract import Row, Store


def history(db: Store, user: str) -> list[Row]:
    """Every version of the user's running summary, oldest first: id, text, episode_id, created_at."""
    return db.query("SELECT id, text, episode_id, created_at FROM summaries WHERE user_id = ? ORDER BY id", (user,))


def latest(db: Store, user: str, *, as_of: datetime | None = None) -> tuple[int, str] | None:
    """(version id, text) of the newest summary, or None before the first episode.

    With ``as_of``: the newest whose last folded-in episode had ended by then
    (store/asof.py); a later version tells of what came after.
    """
    if as_of is None:
        row = db.one("SELECT id, text FROM summaries WHERE user_id = ? ORDER BY id DESC LIMIT 1", (user,))
    else:
        row = db.one(
            "SELECT s.id, s.text FROM summaries s JOIN episodes e ON e.id = s.episode_id"
            " WHERE s.user_id = ? AND e.end_epoch <= ? ORDER BY s.id DESC LIMIT 1",
            (user, asof.epoch(as_of)),
        )
    return (int(row["id"]), row["text"]) if row else None


def add(db: Store, user: str, text: str, episode_id: int) -> None:
    """A new version, made when ``episode_id`` was folded in (caller holds the transaction)."""
    db.conn.execute("INSERT INTO summaries(user_id, text, episode_id, created_at) VALUES (?, ?, ?, ?)", (user, text, episode_id, now_iso()))
