"""Search primitives shared by every kind of memory: vector KNN and full text.

Each memory kind has a vector table (cosine, by user) and a full-text table;
these functions take the table names so episodes, facts, notes and messages
search the same way. How each engine searches is its own method
(store/sqlite.py for SQLite's vec0 and FTS5, store/pg.py for pgvector and tsvector).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nemori_cli.store.asof import Within
from nemori_cli.store.contract import Store


@dataclass(frozen=True)
class TextIndex:
    fts: str  # the full-text table (SQLite: FTS5, with its fts5vocab table {fts}_terms)
    rows: str  # the table whose size the shares are taken of


EPISODE_TEXT = TextIndex("episode_fts", "episodes")
FACT_TEXT = TextIndex("fact_fts", "facts")
NOTE_TEXT = TextIndex("note_fts", "notes")
MESSAGE_TEXT = TextIndex("message_fts", "messages")

# Every kind's tables, named alike on both engines (SQLite: vec0 and FTS5; PostgreSQL: pgvector and tsvector).
VECTOR_TABLES = ("episode_vec", "fact_vec", "note_vec", "message_vec")
TEXT_TABLES = tuple(t.fts for t in (EPISODE_TEXT, FACT_TEXT, NOTE_TEXT, MESSAGE_TEXT))


def vector_search(db: Store, table: str, user: str, query: np.ndarray, k: int, within: Within | None = None) -> list[tuple[int, float]]:
    """(row id, cosine similarity), best first, within one user's partition (and ``within``'s rows)."""
    if not db.has_vectors():
        return []
    return db.vector_search(table, user, query, k, within)


_WORD = re.compile(r"\w+", re.UNICODE)
# Words that match nearly every episode: they cost BM25 time and add no signal.
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)


def search_words(text: str) -> list[str]:
    """The words of user text to search for, each once: stopwords dropped unless nothing else is left."""
    words = _WORD.findall(text.lower())
    return list(dict.fromkeys([w for w in words if w not in _STOPWORDS] or words))


COMMON_TERM_SHARE = 0.2  # a word in more than this share of episodes is not searched for...
COMMON_TERM_MIN_EPISODES = 200  # ...once there are enough episodes for shares to mean something
MAX_QUERY_TERMS = 8
# Past this many rows a share stops bounding the work: 20% of a million rows is
# 200k rows to rank. Larger tables search only words in at most this many rows,
# and rank at most this many matches (docs/SEARCH_LATENCY.md has what ranking
# more costs, and the command that measures it).
TEXT_MATCH_BUDGET = 5_000


@dataclass(frozen=True)
class TextQuery:
    words: list[str]  # the words to search for; none when every word is too common to search for
    max_rows: int | None  # rank at most this many matching rows (None: all of them)


def text_query(db: Store, query: str, text_index: TextIndex | None = None) -> TextQuery:
    """The words of ``query`` worth searching for, rarest first, and how many matches to rank.

    Small tables keep every word that is not in most rows. A table larger than
    TEXT_MATCH_BUDGET also drops words in more than that many rows, and leaves
    the list empty when every word is that common: the vector list answers
    alone then, rather than a ranking of a large share of the store.
    """
    # Stopwords out before counting: PostgreSQL's 'english' configuration drops
    # them, so their counts are 0 there and they would rank as the rarest words
    # and take MAX_QUERY_TERMS's places (SQLite indexes them and counts them high).
    words = search_words(query)
    text_index = text_index or EPISODE_TEXT
    if not words:
        return TextQuery([], None)
    total = db.estimated_rows(text_index.rows)
    large = total > TEXT_MATCH_BUDGET
    if not large and (len(words) <= 1 or total < COMMON_TERM_MIN_EPISODES):
        return TextQuery(words, None)  # small stores: every word counts, and ranking is cheap anyway
    df = db.doc_freq(text_index.fts, words, at_most=TEXT_MATCH_BUDGET if large else None)
    # FTS stores porter stems, so a word missing from the vocabulary may still
    # match; keep it (frequency unknown, treat as rare).
    ranked = sorted(words, key=lambda w: df.get(w, 0))
    limit = min(COMMON_TERM_SHARE * total, TEXT_MATCH_BUDGET) if large else COMMON_TERM_SHARE * total
    kept = [w for w in ranked if df.get(w, 0) <= limit][:MAX_QUERY_TERMS]
    if large:
        return TextQuery(kept, TEXT_MATCH_BUDGET)
    return TextQuery(kept or ranked[:1], None)


def informative_terms(db: Store, query: str, text_index: TextIndex | None = None) -> str:
    """The query without words that too many rows contain (rarest words first); empty when every word is."""
    return " ".join(text_query(db, query, text_index).words)


def text_search(db: Store, text_index: TextIndex, user: str, query: str, k: int, within: Within | None = None) -> list[tuple[int, float]]:
    """(row id, BM25 score where higher is better), best first, among ``within``'s rows when given."""
    chosen = text_query(db, " ".join(_WORD.findall(query.lower())), text_index)
    return db.text_search(text_index.fts, user, chosen.words, k, within, max_rows=chosen.max_rows)
