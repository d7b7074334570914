"""SQL for episodes: rows, the full-text index and the vector index, kept in step."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from nemori_cli.domain import Episode, to_epoch
from nemori_cli.store import messages as message_sql
from nemori_cli.store import index
from nemori_cli.store.db import Database, now_iso


@dataclass(frozen=True)
class EpisodeDraft:
    title: str
    narrative: str
    start: datetime
    end: datetime
    boundary: str
    message_ids: tuple[int, ...]


def add(db: Database, user: str, draft: EpisodeDraft, embedding: np.ndarray) -> int:
    """Insert an episode, index it twice, and give it its messages. Caller holds the transaction."""
    conn = db.conn
    conn.execute(
        "INSERT INTO episodes(user_id, title, narrative, start_ts, end_ts, start_epoch, end_epoch, boundary, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            user,
            draft.title,
            draft.narrative,
            draft.start.isoformat(),
            draft.end.isoformat(),
            to_epoch(draft.start),
            to_epoch(draft.end),
            draft.boundary,
            now_iso(),
        ),
    )
    episode_id = conn.last_insert_rowid()
    conn.execute(
        "INSERT INTO episode_fts(rowid, title, narrative, user_id) VALUES (?, ?, ?, ?)",
        (episode_id, draft.title, draft.narrative, user),
    )
    conn.execute(
        "INSERT INTO episode_vec(rowid, user_id, embedding) VALUES (?, ?, ?)",
        (episode_id, user, np.asarray(embedding, dtype=np.float32).tobytes()),
    )
    message_sql.assign(db, user, list(draft.message_ids), episode_id)
    return episode_id


def _episode(row: dict, msgs=()) -> Episode:
    return Episode(
        id=row["id"],
        user=row["user_id"],
        title=row["title"],
        narrative=row["narrative"],
        start=datetime.fromisoformat(row["start_ts"]),
        end=datetime.fromisoformat(row["end_ts"]),
        created_at=row["created_at"],
        boundary=row["boundary"],
        messages=tuple(msgs),
    )


_COLUMNS = "id, user_id, title, narrative, start_ts, end_ts, created_at, boundary"


def get(db: Database, user: str, episode_id: int, *, with_messages: bool = True) -> Episode | None:
    row = db.one(f"SELECT {_COLUMNS} FROM episodes WHERE user_id = ? AND id = ?", (user, episode_id))
    if row is None:
        return None
    msgs = message_sql.of_episodes(db, user, [episode_id])[episode_id] if with_messages else ()
    return _episode(row, msgs)


def by_ids(db: Database, user: str, ids: list[int], *, with_messages: bool = False) -> dict[int, Episode]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = db.query(f"SELECT {_COLUMNS} FROM episodes WHERE user_id = ? AND id IN ({marks})", (user, *ids))
    msgs = message_sql.of_episodes(db, user, [r["id"] for r in rows]) if with_messages else {}
    return {r["id"]: _episode(r, msgs.get(r["id"], ())) for r in rows}


def list_all(db: Database, user: str, *, with_messages: bool = False, limit: int | None = None) -> list[Episode]:
    sql = f"SELECT {_COLUMNS} FROM episodes WHERE user_id = ? AND status = 'active' ORDER BY start_epoch, id"
    rows = db.query(sql + (" LIMIT ?" if limit else ""), (user, limit) if limit else (user,))
    msgs = message_sql.of_episodes(db, user, [r["id"] for r in rows]) if with_messages else {}
    return [_episode(r, msgs.get(r["id"], ())) for r in rows]


def count(db: Database, user: str) -> int:
    row = db.one("SELECT count(*) AS n FROM episodes WHERE user_id = ? AND status = 'active'", (user,))
    return int(row["n"]) if row else 0


def vector_search(db: Database, user: str, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """(episode id, cosine similarity), best first, within one user's partition."""
    return index.vector_search(db, "episode_vec", user, query, k)


def text_search(db: Database, user: str, query: str, k: int) -> list[tuple[int, float]]:
    """(episode id, BM25 score where higher is better), best first."""
    return index.text_search(db, index.EPISODE_TEXT, user, query, k)
