"""Search primitives shared by every kind of memory: vector KNN and full text.

Each memory kind has a vector table (cosine, by user) and a full-text table;
these functions take the table names so episodes, facts, notes and messages
search the same way. How each engine searches is its own method
(store/db.py for SQLite's vec0 and FTS5, store/pg.py for pgvector and tsvector).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nemori_cli.store.asof import Within
from nemori_cli.store.db import Database


@dataclass(frozen=True)
class TextIndex:
    fts: str  # the full-text table (SQLite: FTS5, with its fts5vocab table {fts}_terms)
    rows: str  # the table whose size the shares are taken of


EPISODE_TEXT = TextIndex("episode_fts", "episodes")
FACT_TEXT = TextIndex("fact_fts", "facts")
NOTE_TEXT = TextIndex("note_fts", "notes")
MESSAGE_TEXT = TextIndex("message_fts", "messages")


def vector_search(db: Database, table: str, user: str, query: np.ndarray, k: int, within: Within | None = None) -> list[tuple[int, float]]:
    """(row id, cosine similarity), best first, within one user's partition (and ``within``'s rows)."""
    if not db.has_vectors():
        return []
    return db.vector_search(table, user, query, k, within)


_WORD = re.compile(r"\w+", re.UNICODE)
# Words that match nearly every episode: they cost BM25 time and add no signal.
_STOPWORDS = frozenset(
    "a an and are as at be but by did do does for from had has have he her his how i in is it its me my of on or "
    "our she so that the their them they this to was we were what when where which who why will with you your".split()
)


def search_words(text: str) -> list[str]:
    """The words of user text to search for, each once: stopwords dropped unless nothing else is left."""
    words = _WORD.findall(text.lower())
    return list(dict.fromkeys([w for w in words if w not in _STOPWORDS] or words))


COMMON_TERM_SHARE = 0.2  # a word in more than this share of episodes is not searched for...
COMMON_TERM_MIN_EPISODES = 200  # ...once there are enough episodes for shares to mean something
MAX_QUERY_TERMS = 8


def informative_terms(db: Database, query: str, text_index: "TextIndex | None" = None) -> str:
    """The query without words that most episodes contain (rarest words first)."""
    words = list(dict.fromkeys(_WORD.findall(query.lower())))
    if len(words) <= 1:
        return query
    text_index = text_index or EPISODE_TEXT
    row = db.one(f"SELECT count(*) AS n FROM {text_index.rows}")
    total = max(1, int(row["n"]) if row else 1)
    if total < COMMON_TERM_MIN_EPISODES:
        return query  # small stores: every word counts, and BM25 is cheap anyway
    df = db.doc_freq(text_index.fts, words)
    # FTS stores porter stems, so a word missing from the vocabulary may still
    # match; keep it (frequency unknown, treat as rare).
    ranked = sorted(words, key=lambda w: df.get(w, 0))
    kept = [w for w in ranked if df.get(w, 0) / total <= COMMON_TERM_SHARE][:MAX_QUERY_TERMS]
    return " ".join(kept or ranked[:1])


def text_search(db: Database, text_index: TextIndex, user: str, query: str, k: int, within: Within | None = None) -> list[tuple[int, float]]:
    """(row id, BM25 score where higher is better), best first, among ``within``'s rows when given."""
    words = search_words(informative_terms(db, " ".join(_WORD.findall(query.lower())), text_index))
    return db.text_search(text_index.fts, user, words, k, within)
