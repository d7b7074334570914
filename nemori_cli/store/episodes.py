"""SQL for episodes: rows, the full-text index and the vector index, kept in step."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from nemori_cli.domain import Episode, Message, to_epoch
from nemori_cli.store import asof, index
from nemori_cli.store import messages as message_sql
from nemori_cli.store.clock import now_iso
from nemori_cli.store.contract import Row, Store


@dataclass(frozen=True)
class EpisodeDraft:
    title: str
    narrative: str
    start: datetime
    end: datetime
    boundary: str
    message_ids: tuple[int, ...]


def add(db: Store, user: str, draft: EpisodeDraft, embedding: np.ndarray, index_text: str | None = None) -> int:
    """Insert an episode, index it twice, and give it its pending messages. Caller holds the transaction.

    ``index_text`` replaces the narrative in the full-text index (the raw
    messages, for the paper's P variant); the row always keeps the narrative.
    """
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
        (episode_id, draft.title, draft.narrative if index_text is None else index_text, user),
    )
    db.insert_vector("episode_vec", episode_id, user, np.asarray(embedding, dtype=np.float32).tobytes())
    message_sql.assign(db, user, list(draft.message_ids), episode_id)
    return episode_id


def supersede(db: Store, user: str, old_ids: list[int], new_id: int, reason: str) -> None:
    """Episodes merged into ``new_id`` leave retrieval; their rows stay, pointing at it.

    Their messages move to the merged episode, which owns them from now on,
    and so do their facts' source links (the old links stay as provenance).
    """
    conn = db.conn
    for old in old_ids:
        conn.execute(
            "UPDATE episodes SET status = 'superseded', superseded_by = ?, superseded_at = ?, superseded_reason = ?"
            " WHERE user_id = ? AND id = ?",
            (new_id, now_iso(), reason, user, old),
        )
        conn.execute("DELETE FROM episode_fts WHERE rowid = ?", (old,))
        db.delete_vectors("episode_vec", [old])
        conn.execute("UPDATE messages SET episode_id = ? WHERE user_id = ? AND episode_id = ?", (new_id, user, old))
        conn.execute(
            "INSERT OR IGNORE INTO fact_sources(fact_id, episode_id) SELECT fact_id, ? FROM fact_sources WHERE episode_id = ?",
            (new_id, old),
        )


def parts(db: Store, user: str, episode_id: int) -> list[Episode]:
    """The episodes merged into this one (its provenance), oldest first."""
    rows = db.query(f"SELECT {_COLUMNS} FROM episodes WHERE user_id = ? AND superseded_by = ? ORDER BY start_epoch, id", (user, episode_id))
    return [_episode(r) for r in rows]


def message_count(db: Store, user: str, episode_id: int) -> int:
    row = db.one("SELECT count(*) AS n FROM messages WHERE user_id = ? AND episode_id = ?", (user, episode_id))
    return int(row["n"]) if row else 0


def _episode(row: Row, msgs: Iterable[Message] = ()) -> Episode:
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
        status=row["status"],
        superseded_by=row["superseded_by"],
        superseded_reason=row["superseded_reason"],
    )


_COLUMNS = "id, user_id, title, narrative, start_ts, end_ts, created_at, boundary, status, superseded_by, superseded_reason"


def get(db: Store, user: str, episode_id: int, *, with_messages: bool = True) -> Episode | None:
    with db.snapshot():  # the row and its messages as of one commit
        row = db.one(f"SELECT {_COLUMNS} FROM episodes WHERE user_id = ? AND id = ?", (user, episode_id))
        if row is None:
            return None
        msgs = message_sql.of_episodes(db, user, [episode_id])[episode_id] if with_messages else ()
    return _episode(row, msgs)


def by_ids(db: Store, user: str, ids: list[int], *, with_messages: bool = False) -> dict[int, Episode]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    with db.snapshot():
        rows = db.query(f"SELECT {_COLUMNS} FROM episodes WHERE user_id = ? AND id IN ({marks})", (user, *ids))
        msgs = message_sql.of_episodes(db, user, [r["id"] for r in rows]) if with_messages else {}
    return {r["id"]: _episode(r, msgs.get(r["id"], ())) for r in rows}


def list_all(
    db: Store,
    user: str,
    *,
    with_messages: bool = False,
    limit: int | None = None,
    include_superseded: bool = False,
    as_of: datetime | None = None,
) -> list[Episode]:
    """Episodes in time order; with ``as_of``, only those ended by then (store/asof.py)."""
    where = "user_id = ?" + ("" if include_superseded else " AND status = 'active'")
    params: tuple[str | float, ...] = (user,)
    if as_of is not None:
        where += " AND end_epoch <= ?"
        params += (asof.epoch(as_of),)
    sql = f"SELECT {_COLUMNS} FROM episodes WHERE {where} ORDER BY start_epoch, id"
    with db.snapshot():  # an episode merged away between the two reads would show without messages
        rows = db.query(sql + (" LIMIT ?" if limit else ""), (*params, limit) if limit else params)
        msgs = message_sql.of_episodes(db, user, [r["id"] for r in rows]) if with_messages else {}
    return [_episode(r, msgs.get(r["id"], ())) for r in rows]


def count(db: Store, user: str) -> int:
    row = db.one("SELECT count(*) AS n FROM episodes WHERE user_id = ? AND status = 'active'", (user,))
    return int(row["n"]) if row else 0


def vector_search(db: Store, user: str, query: np.ndarray, k: int, *, as_of: datetime | None = None) -> list[tuple[int, float]]:
    """(episode id, cosine similarity), best first, within one user's partition (ended by ``as_of``: store/asof.py).

    Only active episodes are in the indexes: supersede() takes merged ones out.
    """
    return index.vector_search(db, "episode_vec", user, query, k, asof.episodes(user, as_of) if as_of else None)


def text_search(db: Store, user: str, query: str, k: int, *, as_of: datetime | None = None) -> list[tuple[int, float]]:
    """(episode id, BM25 score where higher is better), best first."""
    return index.text_search(db, index.EPISODE_TEXT, user, query, k, asof.episodes(user, as_of) if as_of else None)


def chunk_texts(db: Store, user: str) -> list[str]:
    """The narratives of this user's chunk episodes (boundary 'chunk': the RAG baselines' chunks)."""
    return [r["narrative"] for r in db.query("SELECT narrative FROM episodes WHERE user_id = ? AND boundary = 'chunk'", (user,))]


def active_texts(db: Store, user: str) -> list[str]:
    """Every active episode as one text, its title and narrative ("title\\nnarrative")."""
    rows = db.query("SELECT title, narrative FROM episodes WHERE user_id = ? AND status = 'active'", (user,))
    return [f"{r['title']}\n{r['narrative']}" for r in rows]


def active_span(db: Store, user: str, *, as_of: datetime | None = None) -> tuple[datetime, datetime] | None:
    """(first start, last end) of this user's live episodes (ended by ``as_of``); None without any."""
    bound, params = (" AND end_epoch <= ?", (user, asof.epoch(as_of))) if as_of else ("", (user,))
    row = db.one(f"SELECT min(start_ts) AS a, max(end_ts) AS b FROM episodes WHERE user_id = ? AND status = 'active'{bound}", params)
    if not row or row["a"] is None:
        return None
    return datetime.fromisoformat(row["a"]), datetime.fromisoformat(row["b"])
