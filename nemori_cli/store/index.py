"""Search primitives shared by every kind of memory: vector KNN and full text.

Each memory kind has a vec0 table (cosine, partitioned by user) and an FTS5
table (with an fts5vocab table of term statistics); these functions take the
table names so episodes, facts and later notes search the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nemori_cli.store.asof import Within
from nemori_cli.store.db import Database


@dataclass(frozen=True)
class TextIndex:
    fts: str  # the FTS5 table
    terms: str  # its fts5vocab 'row' table
    rows: str  # the table whose size the shares are taken of


EPISODE_TEXT = TextIndex("episode_fts", "episode_fts_terms", "episodes")
FACT_TEXT = TextIndex("fact_fts", "fact_fts_terms", "facts")
NOTE_TEXT = TextIndex("note_fts", "note_fts_terms", "notes")
MESSAGE_TEXT = TextIndex("message_fts", "message_fts_terms", "messages")


def vector_search(db: Database, table: str, user: str, query: np.ndarray, k: int, within: Within | None = None) -> list[tuple[int, float]]:
    """(row id, cosine similarity), best first, within one user's partition (and ``within``'s rows)."""
    if not db.has_vectors():
        return []
    # vec0 takes a rowid IN constraint into its KNN scan: the k nearest of the
    # rows allowed, not the k nearest filtered afterwards.
    allowed = f" AND rowid IN ({within.sql})" if within else ""
    rows = db.query(
        f"SELECT rowid, distance FROM {table} WHERE embedding MATCH ? AND k = ? AND user_id = ?{allowed} ORDER BY distance",
        (np.asarray(query, dtype=np.float32).tobytes(), k, user, *(within.params if within else ())),
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


def informative_terms(db: Database, query: str, text_index: "TextIndex | None" = None) -> str:
    """The query without words that most episodes contain (rarest words first)."""
    words = list(dict.fromkeys(_WORD.findall(query.lower())))
    if len(words) <= 1:
        return query
    marks = ",".join("?" * len(words))
    text_index = text_index or EPISODE_TEXT
    df = {r["term"]: r["doc"] for r in db.query(f"SELECT term, doc FROM {text_index.terms} WHERE term IN ({marks})", tuple(words))}
    row = db.one(f"SELECT count(*) AS n FROM {text_index.rows}")
    total = max(1, int(row["n"]) if row else 1)
    if total < COMMON_TERM_MIN_EPISODES:
        return query  # small stores: every word counts, and BM25 is cheap anyway
    # FTS stores porter stems, so a word missing from the vocabulary may still
    # match; keep it (frequency unknown, treat as rare).
    ranked = sorted(words, key=lambda w: df.get(w, 0))
    kept = [w for w in ranked if df.get(w, 0) / total <= COMMON_TERM_SHARE][:MAX_QUERY_TERMS]
    return " ".join(kept or ranked[:1])


def text_search(db: Database, text_index: TextIndex, user: str, query: str, k: int, within: Within | None = None) -> list[tuple[int, float]]:
    """(row id, BM25 score where higher is better), best first, among ``within``'s rows when given."""
    match = fts_query(informative_terms(db, " ".join(_WORD.findall(query.lower())), text_index))
    if match is None:
        return []
    fts = text_index.fts
    allowed = f" AND rowid IN ({within.sql})" if within else ""
    rows = db.query(
        f"SELECT rowid, bm25({fts}) AS rank FROM {fts}"
        f" WHERE {fts} MATCH ? AND user_id = ?{allowed} ORDER BY rank LIMIT ?",
        (match, user, *(within.params if within else ()), k),
    )
    return [(int(r["rowid"]), -float(r["rank"])) for r in rows]
