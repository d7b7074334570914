"""Forgetting: an episode, a fact, or a whole user, as if it never happened.

``forget_*`` do the deletes and return counts per kind; the caller holds the
transaction, so a failure (or Ctrl-C) forgets nothing. ``make_physical`` runs
after the commit and makes sure the deleted text is gone from the file too,
not only from query results.

Why each step is needed for "gone from the file":
- ``PRAGMA secure_delete`` (set by every forget_*) makes SQLite overwrite
  deleted cells and freed pages with zeros instead of leaving them in place.
- FTS5 deletes only add tombstones; the words stay in the old index segments
  until they are merged, so ``optimize`` rewrites each index into one segment.
- sqlite-vec's vec0 (0.1.9) zeroes a deleted vector's slot in its chunk blob
  and drops a chunk (and its partition's user id) once it is empty, so a
  plain DELETE suffices and no zero-UPDATE beforehand is needed. The tests
  grep the file for a forgotten vector's bytes, so a release that stopped
  doing this would be caught.
- The write-ahead log still holds the old pages until a checkpoint.
- Pages freed *before* forget ran (FTS merges, earlier deletes) were not
  zeroed; only VACUUM rewrites them. It costs a full copy of the file, so it
  runs for a whole user only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nemori_cli.domain import Message
from nemori_cli.errors import NotFound, StoreError
from nemori_cli.store import message_index
from nemori_cli.store import messages as message_sql
from nemori_cli.store import notes as note_sql
from nemori_cli.store import predictions as prediction_sql
from nemori_cli.store.contract import Store
from nemori_cli.store.messages import PLAN_META_PREFIX

# Turns a note's text into its vector: needed only to undo what a forgotten
# note's arrival changed in its neighbours (their vectors are recomputed).
Reembed = Callable[[str], np.ndarray]


def _marks(ids: list[int]) -> str:
    return ",".join("?" * len(ids))


def _secure(db: Store) -> None:
    db.erase_on_delete()


def _history(db: Store, table: str, user: str, root: int) -> list[int]:
    """root and every row it superseded, recursively (its merged parts / audit trail)."""
    rows = db.query(
        f"WITH RECURSIVE chain(id) AS (SELECT CAST(? AS BIGINT) UNION SELECT t.id FROM {table} t JOIN chain c"
        f" ON t.superseded_by = c.id WHERE t.user_id = ?) SELECT id FROM chain ORDER BY id",
        (root, user),
    )
    return [r["id"] for r in rows]


def _delete_ids(db: Store, table: str, ids: list[int], column: str = "rowid") -> int:
    if not ids:
        return 0
    before = db.conn.total_changes()
    # One row at a time: vec0 answers `rowid = ?` with a point lookup.
    db.conn.executemany(f"DELETE FROM {table} WHERE {column} = ?", [(i,) for i in ids])
    return db.conn.total_changes() - before


def _has_index_rows(db: Store, fact_id: int) -> bool:
    return (
        db.one("SELECT rowid FROM fact_fts WHERE rowid = ?", (fact_id,)) is not None
        and db.one("SELECT rowid FROM fact_vec WHERE rowid = ?", (fact_id,)) is not None
    )


def _delete_facts(db: Store, user: str, ids: list[int]) -> dict[str, int]:
    """Delete facts with their links and index rows; un-supersede what they replaced.

    A surviving fact that one of them superseded is active again: the newer
    knowledge is gone, so the older is the best left. Superseded facts keep
    their index rows (search filters them by status), so restoring is just
    the status. Should a fact have lost its index rows, it cannot be searched
    again without an embedding; it stays superseded with a note instead.
    """
    counts = {"facts": 0, "facts_restored": 0}
    if not ids:
        return counts
    doomed = set(ids)
    rows = db.query(f"SELECT text, episode_id FROM facts WHERE user_id = ? AND id IN ({_marks(ids)})", (user, *ids))
    # The prediction records still hold their text: what was missed, what was evoked.
    prediction_sql.scrub(db, user, [r["text"] for r in rows], sorted({r["episode_id"] for r in rows if r["episode_id"] is not None}))
    survivors = db.query(
        f"SELECT id, superseded_by FROM facts WHERE user_id = ? AND superseded_by IN ({_marks(ids)})",
        (user, *ids),
    )
    for row in survivors:
        if row["id"] in doomed:
            continue
        if _has_index_rows(db, row["id"]):
            db.conn.execute(
                "UPDATE facts SET status = 'active', superseded_by = NULL, superseded_reason = NULL,"
                " superseded_at = NULL, valid_until = NULL, valid_until_epoch = NULL WHERE id = ?",
                (row["id"],),
            )
            counts["facts_restored"] += 1
        else:
            db.conn.execute(
                "UPDATE facts SET superseded_by = NULL, superseded_reason = ? WHERE id = ?",
                (f"its successor F{row['superseded_by']} was forgotten", row["id"]),
            )
    _delete_ids(db, "fact_sources", ids, column="fact_id")
    _delete_ids(db, "fact_fts", ids)
    db.delete_vectors("fact_vec", ids)
    # Doomed facts may point at each other; drop those references first.
    db.conn.execute(f"UPDATE facts SET superseded_by = NULL WHERE id IN ({_marks(ids)})", tuple(ids))
    counts["facts"] = _delete_ids(db, "facts", ids, column="id")
    return counts


def _merged_into(db: Store, user: str, episode_id: int) -> int:
    """The live episode a superseded one ended up in (following merges of merges)."""
    current, seen = episode_id, set()
    while current not in seen:
        seen.add(current)
        row = db.one("SELECT superseded_by FROM episodes WHERE user_id = ? AND id = ?", (user, current))
        if row is None or row["superseded_by"] is None:
            break
        current = row["superseded_by"]
    return current


def forget_episode(
    db: Store, user: str, episode_id: int, reembed: Reembed | None = None, turns: message_index.TurnVectors | None = None
) -> dict[str, int]:
    """Delete an episode, its merged parts, their messages, facts only they sourced,
    notes made from its facts, and the running summaries from the first one that folded it in."""
    row = db.one("SELECT id, superseded_by FROM episodes WHERE user_id = ? AND id = ?", (user, episode_id))
    if row is None:
        raise NotFound(f"no episode {episode_id} for user {user}")
    if row["superseded_by"] is not None:
        head = _merged_into(db, user, episode_id)
        raise StoreError(f"episode {episode_id} was merged into E{head}; forget E{head} instead")
    _secure(db)
    ids = _history(db, "episodes", user, episode_id)
    marks = _marks(ids)
    counts = {"episodes": 0, "messages": 0, "facts": 0, "facts_restored": 0, "fact_links": 0, "summaries": 0}

    # Every summary from the first that folded one of these episodes in was
    # built on top of it; later ones are rebuilt by the pipeline, not patched.
    first = db.one(f"SELECT min(id) AS id FROM summaries WHERE user_id = ? AND episode_id IN ({marks})", (user, *ids))
    if first and first["id"] is not None:
        db.conn.execute("DELETE FROM summaries WHERE user_id = ? AND id >= ?", (user, first["id"]))
        counts["summaries"] = db.conn.changes()

    linked = [r["fact_id"] for r in db.query(f"SELECT DISTINCT fact_id FROM fact_sources WHERE episode_id IN ({marks})", tuple(ids))]
    counts["fact_links"] = _delete_ids(db, "fact_sources", ids, column="episode_id")
    orphans = (
        [
            r["id"]
            for r in db.query(
                f"SELECT id FROM facts WHERE user_id = ? AND id IN ({_marks(linked)})"
                " AND NOT EXISTS (SELECT 1 FROM fact_sources s WHERE s.fact_id = facts.id)",
                (user, *linked),
            )
        ]
        if linked
        else []
    )
    counts.update(_delete_facts(db, user, orphans))
    notes = [r["id"] for r in db.query(f"SELECT id FROM notes WHERE user_id = ? AND episode_id IN ({marks})", (user, *ids))]
    if notes:  # --memory nemori+amem only
        counts.update(_delete_notes(db, user, notes, reembed))

    owned = [r["id"] for r in db.query(f"SELECT id FROM messages WHERE user_id = ? AND episode_id IN ({marks})", (user, *ids))]
    survivors = _neighbours(db, user, owned, turns)
    message_index.delete(db, owned)
    db.conn.execute(f"DELETE FROM messages WHERE user_id = ? AND episode_id IN ({marks})", (user, *ids))
    counts["messages"] = db.conn.changes()
    if turns is not None:
        turns.refresh(db, user, survivors)
    _delete_ids(db, "episode_fts", ids)
    db.delete_vectors("episode_vec", ids)
    prediction_sql.delete(db, ids)
    # A fact that survives (it has other sources) no longer names the forgotten episode it was distilled from.
    db.conn.execute(f"UPDATE facts SET episode_id = NULL WHERE user_id = ? AND episode_id IN ({marks})", (user, *ids))
    db.conn.execute(f"UPDATE episodes SET superseded_by = NULL WHERE id IN ({marks})", tuple(ids))
    counts["episodes"] = _delete_ids(db, "episodes", ids, column="id")
    return counts


def _delete_notes(db: Store, user: str, ids: list[int], reembed: Reembed | None) -> dict[str, int]:
    """Delete notes, both directions of their links and their histories; undo what they evolved.

    A surviving note that one of them evolved gets its old context or tags
    back, if nothing changed them since (a later note's change is its own),
    and is re-indexed at once. Nothing points at a deleted note afterwards.
    """
    counts = {"notes": 0, "note_links": 0, "evolutions_undone": 0}
    if not ids:
        return counts
    doomed = set(ids)
    marks = _marks(ids)
    # nemori+amem: a note is a distilled fact, evoked into later predictions like one.
    rows = db.query(f"SELECT content, episode_id FROM notes WHERE user_id = ? AND id IN ({marks})", (user, *ids))
    prediction_sql.scrub(db, user, [r["content"] for r in rows], sorted({r["episode_id"] for r in rows if r["episode_id"] is not None}))
    changes = db.query(f"SELECT note_id, field, before, after FROM note_evolutions WHERE made_by IN ({marks}) ORDER BY id DESC", tuple(ids))
    touched: set[int] = set()
    for change in changes:
        if change["note_id"] in doomed:
            continue
        row = db.one("SELECT context, tags FROM notes WHERE id = ? AND user_id = ?", (change["note_id"], user))
        column = "context" if change["field"] == "context" else "tags"
        if row is None or row[column] != change["after"]:
            continue  # changed again since: the later change stands
        db.conn.execute(f"UPDATE notes SET {column} = ? WHERE id = ?", (change["before"], change["note_id"]))
        touched.add(change["note_id"])
        counts["evolutions_undone"] += 1
    if touched and reembed is None:
        raise StoreError("forgetting these notes undoes changes they made to other notes, which needs the embedder")
    for note_id in sorted(touched):
        note = note_sql.get(db, user, note_id)
        if note is None or reembed is None:  # neither can be: a touched note was just updated, and reembed was checked above
            continue
        note_sql.reindex(db, user, note_id, reembed(note_sql.embedding_text(note.content, note.keywords, note.tags, note.context)))
    db.conn.execute(f"DELETE FROM note_evolutions WHERE made_by IN ({marks}) OR note_id IN ({marks})", (*ids, *ids))
    db.conn.execute(f"DELETE FROM note_links WHERE note_id IN ({marks}) OR linked_id IN ({marks})", (*ids, *ids))
    counts["note_links"] = db.conn.changes() // 2  # one row per direction
    _delete_ids(db, "note_fts", ids)
    db.delete_vectors("note_vec", ids)
    counts["notes"] = _delete_ids(db, "notes", ids, column="id")
    return counts


def forget_note(
    db: Store, user: str, note_id: int, reembed: Reembed | None = None, turns: message_index.TurnVectors | None = None
) -> dict[str, int]:
    """Delete a note, its links and history, undo its evolution of others, and delete the message it was made from.

    The message goes too: a message without a note is pending work for
    --memory amem, and the next ingest would otherwise remember it again.
    """
    note = note_sql.get(db, user, note_id)
    if note is None:
        raise NotFound(f"no note {note_id} for user {user}")
    _secure(db)
    counts = _delete_notes(db, user, [note_id], reembed)
    counts["messages"] = 0
    if note.message_id is not None:
        survivors = _neighbours(db, user, [note.message_id], turns)
        message_index.delete(db, [note.message_id])
        db.conn.execute("DELETE FROM messages WHERE user_id = ? AND id = ?", (user, note.message_id))
        counts["messages"] = db.conn.changes()
        if turns is not None:
            turns.refresh(db, user, survivors)
    return counts


def _neighbours(db: Store, user: str, message_ids: list[int], turns: message_index.TurnVectors | None) -> list[Message]:
    """The surviving turns next to messages about to be forgotten, when their vectors read their neighbours:
    those vectors hold the forgotten words in another form, so they are made again once the messages are gone."""
    if turns is None or turns.how == "turn" or not message_ids:
        return []
    doomed = list(message_sql.by_ids(db, user, message_ids).values())
    return message_index.neighbours_of(db, user, doomed)


def forget_fact(db: Store, user: str, fact_id: int) -> dict[str, int]:
    """Delete a fact and every fact it superseded (its audit trail says the same thing)."""
    if db.one("SELECT id FROM facts WHERE user_id = ? AND id = ?", (user, fact_id)) is None:
        raise NotFound(f"no fact {fact_id} for user {user}")
    _secure(db)
    ids = _history(db, "facts", user, fact_id)
    links = db.one(f"SELECT count(*) AS n FROM fact_sources WHERE fact_id IN ({_marks(ids)})", tuple(ids))
    counts = _delete_facts(db, user, ids)
    return {"facts": counts["facts"], "fact_links": int(links["n"]) if links else 0}


# Known tables in an order the foreign keys accept: fact_sources has no
# user_id, so it goes by the user's fact ids; summaries and messages point at
# episodes; facts and episodes point at themselves (one statement each, so
# rows referring to rows deleted in the same statement are fine).
_USER_TABLES = (
    "episode_predictions",
    "note_fts",
    "note_vec",
    "notes",
    "summaries",
    "fact_fts",
    "fact_vec",
    "facts",
    "message_fts",
    "message_vec",
    "messages",
    "episode_fts",
    "episode_vec",
    "episodes",
    "llm_calls",
    "stage_events",
)


def _tables_with_user_column(db: Store) -> list[str]:
    return [n for n in db.table_names() if "user_id" in db.columns(n)]


def stored(db: Store, user: str) -> dict[str, int]:
    """What a user has, for the confirmation question."""
    return {
        t: int(db.scalar(f"SELECT count(*) AS n FROM {t} WHERE user_id = ?", (user,)))
        for t in ("messages", "episodes", "facts", "notes", "summaries")
    }


def forget_user(db: Store, user: str) -> dict[str, int]:
    """Delete every row of one user from every table; counts per table."""
    _secure(db)
    counts: dict[str, int] = {}
    # A table added by a later migration that this module does not know yet
    # is swept too (first: it may point at episodes or facts), never skipped.
    for table in _tables_with_user_column(db):
        if table not in _USER_TABLES:
            db.conn.execute(f'DELETE FROM "{table}" WHERE user_id = ?', (user,))
            counts[table] = db.conn.changes()
    db.conn.execute("DELETE FROM fact_sources WHERE fact_id IN (SELECT id FROM facts WHERE user_id = ?)", (user,))
    counts["fact_sources"] = db.conn.changes()
    db.delete_meta(f"{PLAN_META_PREFIX}{user}")  # a part-way build's window cut names the user's messages (not counted: not memory)
    # Note links and histories have no user column: they go by the user's note ids, before the notes.
    db.conn.execute("DELETE FROM note_links WHERE note_id IN (SELECT id FROM notes WHERE user_id = ?)", (user,))
    counts["note_links"] = db.conn.changes() // 2
    db.conn.execute("DELETE FROM note_evolutions WHERE note_id IN (SELECT id FROM notes WHERE user_id = ?)", (user,))
    counts["note_evolutions"] = db.conn.changes()
    existing = set(db.table_names())
    for table in _USER_TABLES:
        if table in existing:  # vector tables exist only once an embedder was bound
            db.conn.execute(f"DELETE FROM {table} WHERE user_id = ?", (user,))
            counts[table] = db.conn.changes()
    if not any(counts.values()):
        raise StoreError(f"nothing stored for user {user}")
    return counts


def make_physical(db: Store, *, vacuum: bool = False) -> bool:
    """After the commit: rewrite the text indexes, optionally VACUUM, fold the WAL in.

    False when another process's open read kept the old pages in the file
    (the rows are gone from the memory either way); running this again once
    that reader has closed finishes the job.
    """
    _secure(db)
    with db.transaction():
        db.compact_text_indexes()
    done = db.vacuum() if vacuum else True
    return db.checkpoint() and done
