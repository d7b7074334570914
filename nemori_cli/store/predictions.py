"""SQL for the prediction record: per episode, what was predicted and what the prediction missed (schema 7).

Written by the episode's unit of work together with its facts, so a fact and
the record of why it exists are committed, or rolled back, as one.
"""

from __future__ import annotations

import json

from nemori_cli.domain import PredictionRecord
from nemori_cli.store.clock import now_iso
from nemori_cli.store.contract import Store

SCHEMA = 7  # the schema version that began keeping the record


def record(
    db: Store,
    user: str,
    episode_id: int,
    *,
    method: str,
    predicted: str | None,
    evoked: list[str],
    missed: list[str] | None,
    dropped: list[str],
) -> None:
    """Keep what the prediction step made of one episode. Caller holds the transaction."""
    db.conn.execute(
        "INSERT OR REPLACE INTO episode_predictions(episode_id, user_id, method, predicted, evoked, missed, dropped, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            episode_id,
            user,
            method,
            predicted,
            json.dumps(evoked, ensure_ascii=False),
            None if missed is None else json.dumps(missed, ensure_ascii=False),
            json.dumps(dropped, ensure_ascii=False),
            now_iso(),
        ),
    )


def get(db: Store, user: str, episode_id: int) -> PredictionRecord | None:
    row = db.one(
        "SELECT episode_id, method, predicted, evoked, missed, dropped, created_at FROM episode_predictions WHERE user_id = ? AND episode_id = ?",
        (user, episode_id),
    )
    if row is None:
        return None
    return PredictionRecord(
        episode_id=row["episode_id"],
        method=row["method"],
        predicted=row["predicted"],
        evoked=tuple(json.loads(row["evoked"])),
        missed=None if row["missed"] is None else tuple(json.loads(row["missed"])),
        dropped=tuple(json.loads(row["dropped"])),
        created_at=row["created_at"],
    )


def delete(db: Store, episode_ids: list[int]) -> int:
    """Drop the records of episodes about to be deleted (forget). Caller holds the transaction."""
    before = db.conn.total_changes()
    db.conn.executemany("DELETE FROM episode_predictions WHERE episode_id = ?", [(i,) for i in episode_ids])
    return db.conn.total_changes() - before


FORGOTTEN = "forgotten"  # the method of a record blanked by forget


def scrub(db: Store, user: str, texts: list[str], episode_ids: list[int]) -> int:
    """Blank the records that could still tell what is being forgotten; returns how many. Caller holds the transaction.

    Those of the episodes the forgotten facts (or notes) were distilled from
    (their statements are in what was missed), and those that evoked one of
    them (their text is in evoked, and the prediction was made from it). The
    row stays, saying it was blanked, so `inspect fact` can tell why.
    """
    before = db.conn.total_changes()
    blank = "UPDATE episode_predictions SET method = ?, predicted = NULL, evoked = '[]', missed = NULL, dropped = '[]' WHERE user_id = ?"
    db.conn.executemany(blank + " AND episode_id = ?", [(FORGOTTEN, user, e) for e in episode_ids])
    db.conn.executemany(
        blank + " AND EXISTS (SELECT 1 FROM json_each(episode_predictions.evoked) WHERE value = ?)",
        [(FORGOTTEN, user, t) for t in texts],
    )
    return db.conn.total_changes() - before
