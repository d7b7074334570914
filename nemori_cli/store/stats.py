"""SQL for the counts `nemori stats` shows: what a user's memory holds."""

from __future__ import annotations

from collections.abc import Callable

from nemori_cli.store import episodes, facts, messages, notes
from nemori_cli.store.contract import Store


def _n(db: Store, sql: str, user: str) -> int:
    row = db.one(sql, (user,))
    return int(row["n"]) if row else 0


def counts(db: Store, user: str, *, pending: Callable[[Store, str], int] = messages.count_pending) -> dict[str, int]:
    """How many of each kind the user has, in the order shown.

    ``pending`` counts the work still waiting; it depends on how the memory is
    built (messages without an episode, or without an A-MEM note), which the
    caller knows and this module does not.
    """
    with db.snapshot():  # every count as of one commit, not each of its own
        return _counts(db, user, pending)


def _counts(db: Store, user: str, pending: Callable[[Store, str], int]) -> dict[str, int]:
    return {
        "messages": _n(db, "SELECT count(*) AS n FROM messages WHERE user_id = ?", user),
        "pending": pending(db, user),
        "episodes": episodes.count(db, user),
        "facts": facts.count(db, user),
        "merged_episodes": _n(db, "SELECT count(*) AS n FROM episodes WHERE user_id = ? AND status = 'superseded'", user),
        "superseded_facts": _n(db, "SELECT count(*) AS n FROM facts WHERE user_id = ? AND status = 'superseded'", user),
        "notes": notes.count(db, user),
        "note_links": _n(db, "SELECT count(*) / 2 AS n FROM note_links WHERE note_id IN (SELECT id FROM notes WHERE user_id = ?)", user),
        "evolved_notes": _n(
            db, "SELECT count(DISTINCT note_id) AS n FROM note_evolutions WHERE note_id IN (SELECT id FROM notes WHERE user_id = ?)", user
        ),
    }
