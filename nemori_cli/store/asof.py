"""Memory as it stood at a moment of the conversation: which rows count, as SQL the indexes filter by.

The moment is conversation time (the messages' own timestamps), never the
ingest's clock; a naive time is read as UTC, as everywhere in the store.

- A message counts from its timestamp.
- An episode counts once it has ended (end_epoch <= T). Its narrative may
  tell of anything said up to its end, so counting one still running at T
  (by its start) would leak what was said after T. The price: an episode
  that integration merged across T counts only from the merged end, since
  its parts left the indexes when it was made.
- A fact counts from valid_from (its episode's end, the same rule) until
  valid_until (its successor's valid_from); without a valid_until it counts
  while it is active. A fact that cannot be dated (NULL valid_from, or
  superseded with NULL valid_until) counts in no as-of view: nothing says
  it was known then.
- A note counts from its episode's end (--memory nemori+amem) or its
  message's time (--memory amem). Its links and evolved attributes are
  today's: their history is not rolled back.
- A running summary counts from the end of the episode it folded in last.

Each filter is a SELECT of the row ids that count, put inside the index query
(vec0's KNN, FTS5's MATCH): the top k are k rows that count, not what is left
of k after a filter.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from nemori_cli.domain import to_epoch


@dataclass(frozen=True)
class Within:
    """The row ids a query may return: a SELECT of ids and its parameters."""

    sql: str
    params: tuple[str | float, ...]  # a user id, moments as epoch seconds


def epoch(as_of: datetime) -> float:
    return to_epoch(as_of)


def episodes(user: str, as_of: datetime) -> Within:
    return Within("SELECT id FROM episodes WHERE user_id = ? AND end_epoch <= ?", (user, epoch(as_of)))


# A fact valid at T: known by then, and not yet replaced. As an SQL condition
# on the facts table, with T bound twice.
FACT_VALID = "valid_from_epoch <= ? AND CASE WHEN valid_until_epoch IS NULL THEN status = 'active' ELSE valid_until_epoch > ? END"


def facts(user: str, as_of: datetime) -> Within:
    t = epoch(as_of)
    return Within(f"SELECT id FROM facts WHERE user_id = ? AND {FACT_VALID}", (user, t, t))


def messages(user: str, as_of: datetime) -> Within:
    return Within("SELECT id FROM messages WHERE user_id = ? AND ts_epoch <= ?", (user, epoch(as_of)))


def messages_and_next(user: str, as_of: datetime) -> Within:
    """Messages said by then whose next message in their session was said by then too, or that have none yet then
    or ever: what a vector that reads the turn after (turn_vectors "neighbours") may be ranked on."""
    t = epoch(as_of)
    same = "(s.session = m.session OR (s.session IS NULL AND m.session IS NULL))"  # null-safe on both engines
    later = f"FROM messages s WHERE s.user_id = m.user_id AND {same} AND (s.ts_epoch, s.id) > (m.ts_epoch, m.id)"
    return Within(
        f"SELECT m.id FROM messages m WHERE m.user_id = ? AND m.ts_epoch <= ?"
        f" AND (EXISTS (SELECT 1 {later} AND s.ts_epoch <= ?) OR NOT EXISTS (SELECT 1 {later}))",
        (user, t, t),
    )


def notes(user: str, as_of: datetime) -> Within:
    return Within(
        "SELECT n.id FROM notes n LEFT JOIN episodes e ON e.id = n.episode_id"
        " WHERE n.user_id = ? AND coalesce(e.end_epoch, n.ts_epoch) <= ?",
        (user, epoch(as_of)),
    )
