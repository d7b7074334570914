"""SQL for messages: storing an input idempotently, and the pending buffer."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from nemori_cli.domain import Backlog, IncomingMessage, Message, to_epoch
from nemori_cli.stages import MESSAGE_CHARS_READ
from nemori_cli.store.clock import now_iso
from nemori_cli.store.contract import Row, Store

# The meta row that keeps a window's cut until its episodes are written (pipeline/plan.py), one per user:
# forgotten with the user, and left out of exports (it only lives while a build is part way).
PLAN_META_PREFIX = "window_plan:"


def message_key(msg: IncomingMessage, occurrence: int, namespace: str = "") -> str:
    """A stable identity: the id it came with, else a hash of what it says.

    Two identical id-less messages in one input (two "ok" at the same second)
    are told apart by their occurrence number, so re-reading the same input
    maps each line to the same key and adds nothing.
    """
    if msg.source_id is not None:
        return f"id:{namespace}{msg.source_id}"
    body = "\x00".join([msg.speaker, msg.content, msg.timestamp.isoformat(), msg.session or ""])
    return f"h:{hashlib.sha256(body.encode()).hexdigest()[:32]}#{occurrence}"


def keys_for(messages: Iterable[IncomingMessage], namespace: str = "") -> list[str]:
    seen: Counter[str] = Counter()
    keys = []
    for msg in messages:
        base = message_key(msg, 0, namespace)
        seen[base] += 1
        keys.append(message_key(msg, seen[base] - 1, namespace))
    return keys


def insert_messages(db: Store, user: str, messages: list[IncomingMessage], namespace: str = "") -> int:
    """Store messages not seen before; returns how many were new. Caller holds the transaction."""
    before = db.conn.total_changes()
    stamp = now_iso()
    db.conn.executemany(
        "INSERT INTO messages(user_id, msg_key, source_id, session, speaker, content, ts, ts_epoch, ingested_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(user_id, msg_key) DO NOTHING",
        [
            (user, key, m.source_id, m.session, m.speaker, m.content, m.timestamp.isoformat(), to_epoch(m.timestamp), stamp)
            for m, key in zip(messages, keys_for(messages, namespace))
        ],
    )
    return db.conn.total_changes() - before


def row_to_message(row: Row) -> Message:
    return Message(
        id=row["id"],
        user=row["user_id"],
        key=row["msg_key"],
        speaker=row["speaker"],
        content=row["content"],
        timestamp=datetime.fromisoformat(row["ts"]),
        source_id=row["source_id"],
        session=row["session"],
        episode_id=row["episode_id"],
    )


COLUMNS = "id, user_id, msg_key, speaker, content, ts, source_id, session, episode_id"


def pending(db: Store, user: str, limit: int | None = None) -> list[Message]:
    """The buffer: messages no episode owns yet, oldest first."""
    sql = f"SELECT {COLUMNS} FROM messages WHERE user_id = ? AND episode_id IS NULL ORDER BY ts_epoch, id"
    params: tuple[str | int, ...] = (user,)
    if limit is not None:
        sql += " LIMIT ?"
        params = (user, limit)
    return [row_to_message(r) for r in db.query(sql, params)]


_KEYS_PER_QUERY = 500  # well under SQLite's limit on bound parameters


def stored_keys(db: Store, user: str, keys: list[str]) -> set[str]:
    """Which of these message keys (keys_for) this user already has."""
    found: set[str] = set()
    for i in range(0, len(keys), _KEYS_PER_QUERY):
        chunk = keys[i : i + _KEYS_PER_QUERY]
        marks = ",".join("?" * len(chunk))
        rows = db.query(f"SELECT msg_key FROM messages WHERE user_id = ? AND msg_key IN ({marks})", (user, *chunk))
        found.update(r["msg_key"] for r in rows)
    return found


def backlog(db: Store, user: str) -> Backlog:
    """Messages no episode owns yet: how many, and their characters as the LLM reads them (what an episodic memory mode has left to do)."""
    row = db.one(
        "SELECT count(*) AS n, coalesce(sum(min(length(content), ?)), 0) AS chars FROM messages WHERE user_id = ? AND episode_id IS NULL",
        (MESSAGE_CHARS_READ, user),
    )
    return Backlog(int(row["n"]), int(row["chars"])) if row else Backlog(0, 0)


def first_pending_epoch(db: Store, user: str) -> float | None:
    """When the oldest message no episode owns was said (epoch seconds); None when nothing is pending."""
    row = db.one("SELECT min(ts_epoch) AS t FROM messages WHERE user_id = ? AND episode_id IS NULL", (user,))
    return None if row is None or row["t"] is None else float(row["t"])


def last_before(db: Store, user: str, epoch: float | None = None) -> float | None:
    """When the user's newest message said before ``epoch`` (before None: of all) was said, in epoch seconds; None when there is none."""
    where = "user_id = ?"
    params: list[str | float] = [user]
    if epoch is not None:
        where += " AND ts_epoch < ?"
        params.append(epoch)
    row = db.one(f"SELECT max(ts_epoch) AS t FROM messages WHERE {where}", params)
    return None if row is None or row["t"] is None else float(row["t"])


def any_for(db: Store, user: str) -> bool:
    """Whether the user has any message at all: a user with none has no memory to read."""
    return bool(db.scalar("SELECT EXISTS (SELECT 1 FROM messages WHERE user_id = ?) AS found", (user,)))


def span(db: Store, user: str) -> tuple[float | None, float | None]:
    """When the user's first and last messages were said, in epoch seconds; (None, None) without any."""
    row = db.one("SELECT min(ts_epoch) AS first, max(ts_epoch) AS last FROM messages WHERE user_id = ?", (user,))
    if row is None or row["first"] is None:
        return None, None
    return float(row["first"]), float(row["last"])


def count_pending(db: Store, user: str) -> int:
    return backlog(db, user).messages


def still_pending(db: Store, user: str, ids: list[int]) -> bool:
    """Whether every one of these messages still has no episode (another process may have taken them)."""
    marks = ",".join("?" * len(ids))
    n = db.scalar(f"SELECT count(*) AS n FROM messages WHERE user_id = ? AND episode_id IS NULL AND id IN ({marks})", (user, *ids))
    return bool(n == len(ids))


def all_messages(db: Store, user: str, *, pending_only: bool = False, limit: int | None = None) -> list[Message]:
    if pending_only:
        return pending(db, user, limit)
    sql = f"SELECT {COLUMNS} FROM messages WHERE user_id = ? ORDER BY ts_epoch, id"
    if limit is not None:
        return [row_to_message(r) for r in db.query(sql + " LIMIT ?", (user, limit))]
    return [row_to_message(r) for r in db.query(sql, (user,))]


def recent(db: Store, user: str, limit: int, *, as_of: datetime | None = None) -> list[Message]:
    """The newest ``limit`` messages (of those said by ``as_of``), oldest first: the core context's raw timeline."""
    where = "user_id = ?"
    params: list[str | float] = [user]
    if as_of is not None:
        where += " AND ts_epoch <= ?"
        params.append(to_epoch(as_of))
    rows = db.query(f"SELECT {COLUMNS} FROM messages WHERE {where} ORDER BY ts_epoch DESC, id DESC LIMIT ?", (*params, limit))
    return [row_to_message(r) for r in reversed(rows)]


def place(db: Store, user: str, m: Message) -> int:
    """How many of the user's messages come before ``m`` in time order (time, then id): its place in the history."""
    at = to_epoch(m.timestamp)
    row = db.one(
        "SELECT count(*) AS n FROM messages WHERE user_id = ? AND (ts_epoch < ? OR (ts_epoch = ? AND id < ?))", (user, at, at, m.id)
    )
    return int(row["n"]) if row else 0


def of_episodes(db: Store, user: str, episode_ids: list[int]) -> dict[int, list[Message]]:
    """Raw messages of several episodes, each list in time order."""
    if not episode_ids:
        return {}
    marks = ",".join("?" * len(episode_ids))
    rows = db.query(
        f"SELECT {COLUMNS} FROM messages WHERE user_id = ? AND episode_id IN ({marks}) ORDER BY ts_epoch, id",
        (user, *episode_ids),
    )
    grouped: dict[int, list[Message]] = {i: [] for i in episode_ids}
    for row in rows:
        grouped[row["episode_id"]].append(row_to_message(row))
    return grouped


def assign(db: Store, user: str, message_ids: list[int], episode_id: int) -> None:
    db.conn.executemany(
        "UPDATE messages SET episode_id = ? WHERE user_id = ? AND id = ? AND episode_id IS NULL",
        [(episode_id, user, mid) for mid in message_ids],
    )


def by_ids(db: Store, user: str, ids: list[int]) -> dict[int, Message]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    return {
        r["id"]: row_to_message(r) for r in db.query(f"SELECT {COLUMNS} FROM messages WHERE user_id = ? AND id IN ({marks})", (user, *ids))
    }


def characters_in_episodes(db: Store, user: str) -> int:
    """Characters of this user's messages that belong to an episode, as the LLM read them (stages.MESSAGE_CHARS_READ each at most)."""
    row = db.one(
        "SELECT sum(min(length(content), ?)) AS n FROM messages WHERE user_id = ? AND episode_id IS NOT NULL", (MESSAGE_CHARS_READ, user)
    )
    return int(row["n"] or 0) if row else 0


def changed_keys(db: Store, user: str, messages: list[IncomingMessage], namespace: str = "") -> list[str]:
    """Keys (keys_for) of the messages whose id this user already has stored saying something else.

    insert_messages keeps the stored row (memory was built from it), so an
    edited message would be dropped unseen; this finds them, in input order.
    "What it says" is what identifies a message without an id: speaker,
    content, timestamp and session. A key without an id is that hash, so only
    id keys can differ.
    """
    wanted = {key: m for m, key in zip(messages, keys_for(messages, namespace)) if key.startswith("id:")}
    keys = list(wanted)
    changed: set[str] = set()
    for i in range(0, len(keys), _KEYS_PER_QUERY):
        chunk = keys[i : i + _KEYS_PER_QUERY]
        marks = ",".join("?" * len(chunk))
        rows = db.query(
            f"SELECT msg_key, speaker, content, ts, session FROM messages WHERE user_id = ? AND msg_key IN ({marks})",
            (user, *chunk),
        )
        for r in rows:
            m = wanted[r["msg_key"]]
            if (r["speaker"], r["content"], r["ts"], r["session"]) != (m.speaker, m.content, m.timestamp.isoformat(), m.session):
                changed.add(r["msg_key"])
    return [k for k in keys if k in changed]
