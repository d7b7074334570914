"""SQL for episodes: rows, the full-text index and the vector index, kept in step."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from nemori_cli.domain import Episode, to_epoch
from nemori_cli.store import messages as message_sql
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
    if not db.has_vectors():
        return []
    rows = db.query(
        "SELECT rowid, distance FROM episode_vec WHERE embedding MATCH ? AND k = ? AND user_id = ? ORDER BY distance",
        (np.asarray(query, dtype=np.float32).tobytes(), k, user),
    )
    # vec0's cosine metric reports a distance (1 - cosine); report similarity.
    return [(int(r["rowid"]), 1.0 - float(r["distance"])) for r in rows]


_WORD = re.compile(r"\w+", re.UNICODE)
# Words that match nearly every episode: they cost BM25 time and add no signal.
_STOPWORDS = frozenset(
    "a an and are as at be but by did do does for from had has have he her his how i in is it its me my of on or "
    "our she so that the their them they this to was we were what when where which who why will with you your".split()
)


def fts_query(text: str) -> str | None:
    """User text made safe for FTS5 MATCH: each word quoted, any may match.

    Stopwords are dropped unless nothing else is left.
    """
    words = _WORD.findall(text.lower())
    if not words:
        return None
    words = [w for w in words if w not in _STOPWORDS] or words
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in dict.fromkeys(words))


COMMON_TERM_SHARE = 0.2  # a word in more than this share of episodes is not searched for...
COMMON_TERM_MIN_EPISODES = 200  # ...once there are enough episodes for shares to mean something
MAX_QUERY_TERMS = 8


def informative_terms(db: Database, query: str) -> str:
    """The query without words that most episodes contain (rarest words first)."""
    words = list(dict.fromkeys(_WORD.findall(query.lower())))
    if len(words) <= 1:
        return query
    marks = ",".join("?" * len(words))
    df = {r["term"]: r["doc"] for r in db.query(f"SELECT term, doc FROM episode_fts_terms WHERE term IN ({marks})", tuple(words))}
    row = db.one("SELECT count(*) AS n FROM episodes")
    total = max(1, int(row["n"]) if row else 1)
    if total < COMMON_TERM_MIN_EPISODES:
        return query  # small stores: every word counts, and BM25 is cheap anyway
    # FTS stores porter stems, so a word missing from the vocabulary may still
    # match; keep it (frequency unknown, treat as rare).
    ranked = sorted(words, key=lambda w: df.get(w, 0))
    kept = [w for w in ranked if df.get(w, 0) / total <= COMMON_TERM_SHARE][:MAX_QUERY_TERMS]
    return " ".join(kept or ranked[:1])


def text_search(db: Database, user: str, query: str, k: int) -> list[tuple[int, float]]:
    """(episode id, BM25 score where higher is better), best first."""
    match = fts_query(informative_terms(db, " ".join(_WORD.findall(query.lower()))))
    if match is None:
        return []
    rows = db.query(
        "SELECT rowid, bm25(episode_fts) AS rank FROM episode_fts"
        " WHERE episode_fts MATCH ? AND user_id = ? ORDER BY rank LIMIT ?",
        (match, user, k),
    )
    return [(int(r["rowid"]), -float(r["rank"])) for r in rows]
