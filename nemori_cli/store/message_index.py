"""The raw messages as a search index of their own: full text and vectors.

Episodes and facts are what the LLM made of a conversation; a 0.5B model
drops or garbles details (an exact figure, a name, a duration) that the raw
turn still has. Indexing every message, pending ones included, lets the
answer reach that turn directly. A message's index rows share its rowid, so
"which messages are not indexed yet" is a rowid lookup, and an old database
is indexed on its next ingest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from nemori_cli.domain import Message, to_epoch
from nemori_cli.store import asof, index
from nemori_cli.store import messages as message_sql
from nemori_cli.store.contract import Store

BATCH = 256  # messages embedded per call: bounded memory on a 50,000-message import


def embedding_text(m: Message, limit: int) -> str:
    """What a message's vector is made from: who said it and the first ``limit`` characters of what they said.

    The embedder reads only the beginning of a text (embed/base.py: max_chars), so the content is cut
    before the two are joined: a 50 MB message is never copied, nor tokenized, whole. The full-text index
    keeps every word (``add``): SQLite's tokenizer streams the text, 0.5 s and no copy for 50 MB.
    """
    return f"{m.speaker}: {m.content[:limit]}"[:limit]


def unindexed(db: Store, user: str, limit: int | None = None) -> list[Message]:
    sql = (
        f"SELECT {message_sql.COLUMNS} FROM messages m WHERE user_id = ?"
        " AND NOT EXISTS (SELECT 1 FROM message_fts f WHERE f.rowid = m.id) ORDER BY ts_epoch, id"
    )
    params: tuple[str | int, ...] = (user,)
    if limit is not None:
        sql += " LIMIT ?"
        params = (user, limit)
    return [message_sql.row_to_message(r) for r in db.query(sql, params)]


def index_all(db: Store, user: str, embed: Callable[[list[str]], np.ndarray], max_chars: int, *, how: str = "turn") -> int:
    """Index every message of the user that has no index rows yet, its vector made as ``how`` says (vectors_for). Caller holds the transaction.

    With ``how="neighbours"`` a turn's vector reads the turns around it, so a message added next to turns
    indexed earlier (the next line of a chat, ingested tomorrow; an older line imported late) changes theirs:
    they are embedded again.
    """
    done = 0
    while batch := unindexed(db, user, BATCH):
        windows = around(db, user, batch, 1) if how != "turn" else {}
        add(db, user, batch, vectors_for(db, user, batch, embed, max_chars, how, windows))
        if how != "turn":
            reembed(db, user, _indexed(db, _outside(batch, windows)), embed, max_chars, how)
        done += len(batch)
    return done


def vectors_for(
    db: Store,
    user: str,
    messages: list[Message],
    embed: Callable[[list[str]], np.ndarray],
    limit: int,
    how: str,
    windows: dict[int, list[Message]] | None = None,
) -> np.ndarray:
    """The search vectors of ``messages``: ``how`` is the profile's turn_vectors (memory/profile.TURN_VECTORS).

    "turn": the turn alone (``embedding_text``). "neighbours": the turn alone plus the turn read with one turn
    before and one after it in its session, the two vectors summed and normalised. A line such as "Yeah, it's
    special to me." says what it is about only with the question it answers; the sum keeps the turn's own
    words ranked as they were while the neighbours add what it is about (docs/BEYOND.md, thirteenth round).
    ``windows``: each message's window (``around(..., 1)``), when the caller has it already.
    """
    alone = embed([embedding_text(m, limit) for m in messages])
    if how == "turn" or not messages:
        return alone
    windows = windows if windows is not None else around(db, user, messages, 1)
    read_together = embed([window_text(windows[m.id], m, limit) for m in messages])
    mixed = np.asarray(alone, dtype=np.float32) + np.asarray(read_together, dtype=np.float32)
    unit: np.ndarray = mixed / np.maximum(np.linalg.norm(mixed, axis=1, keepdims=True), 1e-12)
    return unit


def window_text(window: list[Message], turn: Message, limit: int) -> str:
    """A turn with its neighbours, one line each, in at most ``limit`` characters, the turn itself always whole.

    When all of it fits (nearly every chat turn) it is the lines as they are; otherwise the turn keeps its
    own ``embedding_text`` and the neighbours share what is left, the one before cut from its start (its end
    is what the turn answers), the one after cut at its end.
    """
    lines = [embedding_text(t, limit) for t in window]
    joined = "\n".join(lines)
    if len(joined) <= limit:
        return joined
    at = next(i for i, t in enumerate(window) if t.id == turn.id)
    own, before, after = lines[at], lines[:at], lines[at + 1 :]
    room = max(0, limit - len(own) - len(before) - len(after))  # one newline for each neighbour
    share = room // max(1, len(before) + len(after))
    if not share:
        return own
    return "\n".join([*(b[-share:] for b in before), own, *(a[:share] for a in after)])


@dataclass(frozen=True)
class TurnVectors:
    """How to make a turn's vector again after its neighbours changed (forgetting a turn): the embedder, the
    characters it reads, and the profile's turn_vectors."""

    embed: Callable[[list[str]], np.ndarray]
    limit: Callable[[], int]  # called only when a vector is made: the embedder loads then, not before
    how: str

    def refresh(self, db: Store, user: str, messages: list[Message]) -> None:
        """``messages``' vectors made again where they read their neighbours; a turn embedded alone is unchanged."""
        if self.how != "turn" and (indexed := _indexed(db, messages)):
            reembed(db, user, indexed, self.embed, self.limit(), self.how)


def neighbours_of(db: Store, user: str, messages: list[Message]) -> list[Message]:
    """The turns just before and just after each of ``messages`` in its session, not among them (read before they go)."""
    return _outside(messages, around(db, user, messages, 1))


def reembed(db: Store, user: str, messages: list[Message], embed: Callable[[list[str]], np.ndarray], limit: int, how: str) -> None:
    """Make indexed messages' vectors again (their neighbours changed); the full-text rows stay as they are."""
    if not messages or not db.has_vectors():
        return
    vectors = vectors_for(db, user, messages, embed, limit, how)
    db.delete_vectors("message_vec", [m.id for m in messages])
    for m, v in zip(messages, vectors):
        db.insert_vector("message_vec", m.id, user, np.asarray(v, dtype=np.float32).tobytes())


def _outside(messages: list[Message], windows: dict[int, list[Message]]) -> list[Message]:
    """The messages of ``windows`` that are not among ``messages``: their neighbours."""
    own = {m.id for m in messages}
    found = {t.id: t for window in windows.values() for t in window if t.id not in own}
    return list(found.values())


def _indexed(db: Store, messages: list[Message]) -> list[Message]:
    """Those of ``messages`` that have index rows already."""
    if not messages:
        return []
    marks = ", ".join("?" for _ in messages)
    have = {r["rowid"] for r in db.query(f"SELECT rowid FROM message_fts WHERE rowid IN ({marks})", tuple(m.id for m in messages))}
    return [m for m in messages if m.id in have]


def add(db: Store, user: str, messages: list[Message], vectors: np.ndarray | list[np.ndarray]) -> None:
    db.conn.executemany(
        "INSERT INTO message_fts(rowid, speaker, content, user_id) VALUES (?, ?, ?, ?)",
        [(m.id, m.speaker, m.content, user) for m in messages],
    )
    if db.has_vectors():
        for m, v in zip(messages, vectors):
            db.insert_vector("message_vec", m.id, user, np.asarray(v, dtype=np.float32).tobytes())


def delete(db: Store, ids: list[int]) -> None:
    """Drop index rows of messages about to be deleted (one at a time: vec0 point lookups)."""
    db.conn.executemany("DELETE FROM message_fts WHERE rowid = ?", [(i,) for i in ids])
    if db.has_vectors():
        db.delete_vectors("message_vec", ids)


def count(db: Store, user: str) -> int:
    row = db.one("SELECT count(*) AS n FROM message_fts WHERE user_id = ?", (user,))
    return int(row["n"]) if row else 0


def vector_search(
    db: Store, user: str, query: np.ndarray, k: int, *, as_of: datetime | None = None, reads_after: bool = False
) -> list[tuple[int, float]]:
    """(message id, cosine similarity), best first; with ``as_of``, only messages said by then.

    ``reads_after``: the vectors read the turn after (turn_vectors "neighbours"), so with ``as_of`` a turn whose
    next line was said later is left out: its vector holds words the memory did not have then (it can still be
    found by its words, and shown beside a turn found).
    """
    return index.vector_search(db, "message_vec", user, query, k, _said_by(user, as_of, reads_after) if as_of else None)


def _said_by(user: str, as_of: datetime, reads_after: bool) -> asof.Within:
    return asof.messages_and_next(user, as_of) if reads_after else asof.messages(user, as_of)


def vector_search_between(
    db: Store,
    user: str,
    query: np.ndarray,
    k: int,
    spans: list[tuple[float, float]],
    *,
    as_of: datetime | None = None,
    reads_after: bool = False,
) -> list[tuple[int, float]]:
    """(message id, cosine similarity), best first, among the messages said inside ``spans`` (epoch seconds, inclusive)."""
    if not spans:
        return []
    inside = " OR ".join("ts_epoch BETWEEN ? AND ?" for _ in spans)
    until: str = " AND ts_epoch <= ?" if as_of else ""
    bound: tuple[str | float, ...] = (asof.epoch(as_of),) if as_of else ()
    if as_of and reads_after:  # only then is "said by then" not enough (vector_search)
        said = asof.messages_and_next(user, as_of)
        until, bound = f" AND id IN ({said.sql})", said.params
    within = asof.Within(
        f"SELECT id FROM messages WHERE user_id = ? AND ({inside}){until}", (user, *(t for span in spans for t in span), *bound)
    )
    return index.vector_search(db, "message_vec", user, query, k, within)


def years(db: Store, user: str) -> range:
    """The years this user's messages were said in (UTC), first to last; empty for no messages."""
    row = db.one("SELECT min(ts_epoch) AS lo, max(ts_epoch) AS hi FROM messages WHERE user_id = ?", (user,))
    if not row or row["lo"] is None:
        return range(0)
    first, last = (datetime.fromtimestamp(float(row[k]), UTC).year for k in ("lo", "hi"))
    return range(first, last + 1)


def text_search(db: Store, user: str, query: str, k: int, *, as_of: datetime | None = None) -> list[tuple[int, float]]:
    return index.text_search(db, index.MESSAGE_TEXT, user, query, k, asof.messages(user, as_of) if as_of else None)


def around(
    db: Store, user: str, messages: list[Message], turns: int, *, before: int | None = None, as_of: datetime | None = None
) -> dict[int, list[Message]]:
    """Each message with up to ``turns`` messages after it and ``before`` (default: ``turns``) before it in its session, in time order.

    A question's answer is often the reply to a question ("What did you do?"
    "Went hiking."), so a retrieved turn brings its neighbours; with
    ``as_of``, only those said by then (the reply may come after it).
    """
    out: dict[int, list[Message]] = {}
    until, bound = (" AND ts_epoch <= ?", (asof.epoch(as_of),)) if as_of else ("", ())
    n_before = turns if before is None else before
    for m in messages:
        same = "session IS ?"
        earlier = (
            db.query(
                f"SELECT {message_sql.COLUMNS} FROM messages WHERE user_id = ? AND {same} AND (ts_epoch, id) < (?, ?)"
                " ORDER BY ts_epoch DESC, id DESC LIMIT ?",
                (user, m.session, to_epoch(m.timestamp), m.id, n_before),
            )
            if n_before > 0
            else []
        )
        after = (
            db.query(
                f"SELECT {message_sql.COLUMNS} FROM messages WHERE user_id = ? AND {same} AND (ts_epoch, id) > (?, ?){until}"
                " ORDER BY ts_epoch, id LIMIT ?",
                (user, m.session, to_epoch(m.timestamp), m.id, *bound, turns),
            )
            if turns > 0
            else []
        )
        out[m.id] = [*(message_sql.row_to_message(r) for r in reversed(earlier)), m, *(message_sql.row_to_message(r) for r in after)]
    return out


def unmentioned(db: Store, user: str, words: list[str], *, as_of: datetime | None = None) -> list[str]:
    """The words that no message of this user (said by ``as_of``) contains (FTS5 applies its own stemming to each)."""
    within = asof.messages(user, as_of) if as_of else None
    return [word for word in words if not db.text_contains("message_fts", user, word.replace('"', ""), within)]
