"""SQL for A-MEM notes: rows, links, evolution history, and both indexes kept in step.

Every write that changes what a note says (its context or tags) rewrites its
full-text row and its vector in the same transaction, so search never sees a
note as it was before evolution. Links are stored as pairs of note ids, one
row per direction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime

import numpy as np

from nemori_cli.domain import Backlog, Note, NoteChange, to_epoch
from nemori_cli.stages import MESSAGE_CHARS_READ
from nemori_cli.store import asof, index
from nemori_cli.store.base import children
from nemori_cli.store.clock import now_iso
from nemori_cli.store.contract import Row, Store

_COLUMNS = "id, user_id, content, ts, keywords, tags, context, origin, message_id, episode_id, created_at, updated_at"


def embedding_text(content: str, keywords: list[str] | tuple[str, ...], tags: list[str] | tuple[str, ...], context: str) -> str:
    """What a note's vector is computed from: its content and every attribute (as A-MEM does)."""
    return f"{content}\nKeywords: {', '.join(keywords)}\nTags: {', '.join(tags)}\nContext: {context}"


def add(
    db: Store,
    user: str,
    *,
    content: str,
    ts: datetime,
    keywords: list[str],
    tags: list[str],
    context: str,
    embedding: np.ndarray,
    origin: str = "model",
    message_id: int | None = None,
    episode_id: int | None = None,
) -> int:
    """Insert a note and index it twice. Caller holds the transaction."""
    conn = db.conn
    conn.execute(
        "INSERT INTO notes(user_id, content, ts, ts_epoch, keywords, tags, context, origin, message_id, episode_id, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            user,
            content,
            ts.isoformat(),
            to_epoch(ts),
            json.dumps(keywords),
            json.dumps(tags),
            context,
            origin,
            message_id,
            episode_id,
            now_iso(),
        ),
    )
    note_id = conn.last_insert_rowid()
    _index_text(db, user, note_id, content, keywords, tags, context)
    db.insert_vector("note_vec", note_id, user, _blob(embedding))
    return note_id


def _blob(embedding: np.ndarray) -> bytes:
    return np.asarray(embedding, dtype=np.float32).tobytes()


def _index_text(db: Store, user: str, note_id: int, content: str, keywords: Iterable[str], tags: Iterable[str], context: str) -> None:
    db.conn.execute(
        "INSERT INTO note_fts(rowid, content, keywords, tags, context, user_id) VALUES (?, ?, ?, ?, ?, ?)",
        (note_id, content, " ".join(keywords), " ".join(tags), context, user),
    )


def link(db: Store, a: int, b: int, made_by: int) -> bool:
    """Link two notes both ways; False when they were linked already (or are the same note)."""
    if a == b:
        return False
    now = now_iso()
    before = db.conn.total_changes()
    db.conn.executemany(
        "INSERT OR IGNORE INTO note_links(note_id, linked_id, made_by, created_at) VALUES (?, ?, ?, ?)",
        [(a, b, made_by, now), (b, a, made_by, now)],
    )
    return db.conn.total_changes() - before > 0


def evolve(db: Store, user: str, note: Note, *, context: str, tags: list[str], made_by: int | None, embedding: np.ndarray) -> list[str]:
    """Rewrite a note's context and tags, its indexes at once, and record each change; returns the fields changed."""
    changed = []
    if context != note.context:
        changed.append(("context", note.context, context))
    if list(tags) != list(note.tags):
        changed.append(("tags", json.dumps(list(note.tags)), json.dumps(list(tags))))
    if not changed:
        return []
    conn = db.conn
    now = now_iso()
    conn.execute(
        "UPDATE notes SET context = ?, tags = ?, updated_at = ? WHERE id = ? AND user_id = ?",
        (context, json.dumps(list(tags)), now, note.id, user),
    )
    conn.executemany(
        "INSERT INTO note_evolutions(note_id, made_by, field, before, after, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        [(note.id, made_by, field, before, after, now) for field, before, after in changed],
    )
    reindex(db, user, note.id, embedding)
    return [field for field, _, _ in changed]


def reindex(db: Store, user: str, note_id: int, embedding: np.ndarray) -> None:
    """Make both indexes say what the row says now (after evolution, or an evolution undone)."""
    note = get(db, user, note_id)
    if note is None:
        return
    db.conn.execute("DELETE FROM note_fts WHERE rowid = ?", (note_id,))
    _index_text(db, user, note_id, note.content, note.keywords, note.tags, note.context)
    db.delete_vectors("note_vec", [note_id])
    db.insert_vector("note_vec", note_id, user, _blob(embedding))


def _note(row: Row, links: tuple[int, ...]) -> Note:
    return Note(
        id=row["id"],
        user=row["user_id"],
        content=row["content"],
        timestamp=datetime.fromisoformat(row["ts"]),
        keywords=tuple(json.loads(row["keywords"])),
        tags=tuple(json.loads(row["tags"])),
        context=row["context"],
        origin=row["origin"],
        message_id=row["message_id"],
        episode_id=row["episode_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        links=links,
    )


def links_of(db: Store, ids: list[int]) -> dict[int, tuple[int, ...]]:
    return children(db, "note_links", "note_id", "linked_id", ids)


def by_ids(db: Store, user: str, ids: list[int], *, as_of: datetime | None = None) -> dict[int, Note]:
    """The notes of these ids; with ``as_of``, only those that counted then (store/asof.py)."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    within = asof.notes(user, as_of) if as_of else None
    allowed = f" AND id IN ({within.sql})" if within else ""
    with db.snapshot():  # the rows and their links as of one commit
        rows = db.query(
            f"SELECT {_COLUMNS} FROM notes WHERE user_id = ? AND id IN ({marks}){allowed}", (user, *ids, *(within.params if within else ()))
        )
        links = links_of(db, [r["id"] for r in rows])
    return {r["id"]: _note(r, links.get(r["id"], ())) for r in rows}


def get(db: Store, user: str, note_id: int) -> Note | None:
    return by_ids(db, user, [note_id]).get(note_id)


def list_all(db: Store, user: str, *, limit: int | None = None) -> list[Note]:
    sql = f"SELECT {_COLUMNS} FROM notes WHERE user_id = ? ORDER BY ts_epoch, id"
    with db.snapshot():
        rows = db.query(sql + (" LIMIT ?" if limit else ""), (user, limit) if limit else (user,))
        links = links_of(db, [r["id"] for r in rows])
    return [_note(r, links.get(r["id"], ())) for r in rows]


def count(db: Store, user: str) -> int:
    row = db.one("SELECT count(*) AS n FROM notes WHERE user_id = ?", (user,))
    return int(row["n"]) if row else 0


def _changes(db: Store, column: str, note_id: int) -> list[NoteChange]:
    rows = db.query(
        f"SELECT id, note_id, made_by, field, before, after, created_at FROM note_evolutions WHERE {column} = ? ORDER BY id", (note_id,)
    )
    return [NoteChange(r["id"], r["note_id"], r["made_by"], r["field"], r["before"], r["after"], r["created_at"]) for r in rows]


def history(db: Store, note_id: int) -> list[NoteChange]:
    """Every change evolution made to a note, oldest first."""
    return _changes(db, "note_id", note_id)


def caused_by(db: Store, note_id: int) -> list[NoteChange]:
    """The changes a note's arrival made to other notes, oldest first."""
    return _changes(db, "made_by", note_id)


def vector_search(db: Store, user: str, query: np.ndarray, k: int, *, as_of: datetime | None = None) -> list[tuple[int, float]]:
    """(note id, cosine similarity), best first."""
    return index.vector_search(db, "note_vec", user, query, k, asof.notes(user, as_of) if as_of else None)


def text_search(db: Store, user: str, query: str, k: int, *, as_of: datetime | None = None) -> list[tuple[int, float]]:
    return index.text_search(db, index.NOTE_TEXT, user, query, k, asof.notes(user, as_of) if as_of else None)


def unnoted_messages(db: Store, user: str, limit: int | None = None) -> list[int]:
    """Ids of stored messages that have no note yet (--memory amem's pending work), oldest first."""
    sql = (
        "SELECT m.id FROM messages m WHERE m.user_id = ? AND NOT EXISTS (SELECT 1 FROM notes n WHERE n.message_id = m.id)"
        " ORDER BY m.ts_epoch, m.id"
    )
    rows = db.query(sql + (" LIMIT ?" if limit else ""), (user, limit) if limit else (user,))
    return [r["id"] for r in rows]


def unnoted_backlog(db: Store, user: str) -> Backlog:
    """Messages without a note yet: how many, and their characters (--memory amem's work left)."""
    row = db.one(
        "SELECT count(*) AS n, coalesce(sum(min(length(m.content), ?)), 0) AS chars FROM messages m"
        " WHERE m.user_id = ? AND NOT EXISTS (SELECT 1 FROM notes n WHERE n.message_id = m.id)",
        (MESSAGE_CHARS_READ, user),
    )
    return Backlog(int(row["n"]), int(row["chars"])) if row else Backlog(0, 0)


def any_from_messages(db: Store, user: str) -> bool:
    """Whether any of this user's notes is a raw message itself (--memory amem), not a distilled fact."""
    return db.one("SELECT 1 AS x FROM notes WHERE user_id = ? AND message_id IS NOT NULL LIMIT 1", (user,)) is not None


def count_unnoted(db: Store, user: str) -> int:
    return unnoted_backlog(db, user).messages


def has_note(db: Store, message_id: int) -> bool:
    return db.one("SELECT 1 AS x FROM notes WHERE message_id = ?", (message_id,)) is not None


def count_evolved(db: Store, user: str) -> int:
    """How many of this user's notes another note has changed (evolved) at least once."""
    row = db.one(
        "SELECT count(DISTINCT e.note_id) AS n FROM note_evolutions e JOIN notes n ON n.id = e.note_id WHERE n.user_id = ?", (user,)
    )
    return int(row["n"]) if row else 0
