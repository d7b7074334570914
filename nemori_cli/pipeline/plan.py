"""A window's cut, kept in the database until its episodes are written: what makes a resumed build equal an uninterrupted one.

Without it, a run stopped in the middle of a window (kill -9, `build --stop`,
a token budget) would cut the rest of that window again on resume, from a
window that now starts later and reaches further, and the cuts depend on the
window (partition.py aims at one cut per few messages of it). So the run
would make other episodes than a run that was never stopped. With the plan
saved before the window's first episode, and each episode taking its group
off the plan in its own transaction, the next run writes the groups left as
they were cut, then goes on as an uninterrupted run would.

The plan is a meta row per user (no schema change): a JSON list of groups,
each its message ids and boundary. A plan that is no longer the head of the
pending messages (forgotten, taken by another process, or older messages
ingested since) is dropped, and the window cut again.
"""

from __future__ import annotations

import json

from nemori_cli.pipeline.partition import Group
from nemori_cli.store import messages as message_sql
from nemori_cli.store.contract import Store


def _key(user: str) -> str:
    return f"{message_sql.PLAN_META_PREFIX}{user}"


def save(db: Store, user: str, groups: list[Group]) -> None:
    """Record the groups this window will write (caller holds the transaction); nothing for no groups."""
    if groups:
        db.set_meta(
            _key(user),
            json.dumps([{"ids": [m.id for m in g.messages], "keys": [m.key for m in g.messages], "boundary": g.boundary} for g in groups]),
        )
    else:
        db.delete_meta(_key(user))


def written(db: Store, user: str, ids: list[int]) -> None:
    """An episode of these messages was stored (caller holds its transaction): its group leaves the plan."""
    raw = db.get_meta(_key(user))
    if raw is None:
        return
    left = [g for g in json.loads(raw) if set(g["ids"]).isdisjoint(ids)]
    if left:
        db.set_meta(_key(user), json.dumps(left))
    else:
        db.delete_meta(_key(user))


def left(db: Store, user: str) -> list[Group]:
    """The groups a stopped run had cut but not written, oldest first; [] when there are none or they no longer hold."""
    raw = db.get_meta(_key(user))
    if raw is None:
        return []
    try:
        planned = [(list(map(int, g["ids"])), list(map(str, g["keys"])), str(g["boundary"])) for g in json.loads(raw)]
    except (ValueError, KeyError, TypeError):
        planned = []  # unreadable: cut again (a plan is only an aid to equal resumption)
    wanted = [i for ids, _, _ in planned for i in ids]
    head = message_sql.pending(db, user, limit=len(wanted)) if wanted else []
    # Still the oldest pending messages, in this order, and the same ones (an id can be reused after a forget)?
    if not planned or [(m.id, m.key) for m in head] != [pair for ids, keys, _ in planned for pair in zip(ids, keys)]:
        with db.transaction(user=user):
            db.delete_meta(_key(user))  # cut again
        return []
    found = {m.id: m for m in head}
    return [Group(tuple(found[i] for i in ids), boundary) for ids, _, boundary in planned]
