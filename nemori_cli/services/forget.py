"""Forgetting: the Python API's forget (api.Memory.forget: one episode, fact or note, or all of a user, deleted for
good and scrubbed out of the file), and what `nemori forget` does beside it: the question's counts, and the scrub."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from nemori_cli.config import Settings
from nemori_cli.domain import MAX_ID
from nemori_cli.errors import ConfigError, StoreError
from nemori_cli.services.read import Reading

if TYPE_CHECKING:
    from nemori_cli.deps import Session

ForgetKind = Literal["episode", "fact", "note"]


def checked_args(kind: ForgetKind | Literal["user"], item_id: int | None) -> tuple:
    """The id ``forget_<kind>`` takes, checked before the store is opened: none for a user, an integer for the rest."""
    if kind == "user":
        if item_id is not None:
            raise ConfigError("forget('user') takes no id")
        return ()
    if kind in ("episode", "fact", "note"):
        if not isinstance(item_id, int) or isinstance(item_id, bool) or abs(item_id) > MAX_ID:
            raise ConfigError(f"forget({kind!r}) needs the {kind}'s id (an integer of at most {MAX_ID})")
        return (item_id,)
    raise ConfigError(f"forget: {kind!r} is not one of episode, fact, note, user")


def forget(session: Session, user: str, kind: ForgetKind | Literal["user"], args: tuple, shown: object) -> dict[str, int]:
    """Delete it (store/forget.py), drop the user's saved KV state, and scrub the file; what was deleted, table by table.

    ``shown`` names the store in the error said when another process reading
    the file keeps the old text in it.
    """
    from nemori_cli.store import forget as forget_sql

    store = session.db
    extra = _embedders(session, store) if kind in ("episode", "note") else {}
    with store.transaction(user=user):  # on PostgreSQL, after this user's ingest units in flight
        counts = getattr(forget_sql, f"forget_{kind}")(store, user, *args, **extra)
    try:
        session.core_cache.forget(user)  # a saved KV state holds the forgotten text in another form
    finally:  # one that cannot be removed is said, after the file is scrubbed all the same
        scrubbed = forget_sql.make_physical(store, vacuum=kind == "user")
    if not scrubbed:
        raise StoreError(
            f"forgotten from the memory, but another process reading {shown} keeps the old text in the file "
            "until it closes; run `nemori forget --scrub` then"
        )
    return counts


def _embedders(session: Session, store) -> dict:
    """What forgetting an episode or a note may have to embed again: notes it evolved, and the turns next to its
    messages where the memory's turn vectors read their neighbours (memory/profile.turn_vectors)."""
    from nemori_cli.embed.base import max_chars
    from nemori_cli.memory import profile
    from nemori_cli.store import message_index

    # Each loads the model only when it is called: forgetting what holds nothing to embed again needs none.
    how = (profile.stored(store) or profile.Profile()).turn_vectors
    return {
        "reembed": lambda text: session.embedder.embed_documents([text])[0],
        "turns": message_index.TurnVectors(lambda texts: session.embedder.embed_documents(texts), lambda: max_chars(session.embedder), how),
    }


def stored(settings: Settings) -> dict[str, int]:
    """How many rows of each kind the user has: what `forget user NAME` asks about before it deletes them."""
    from nemori_cli.store import forget as forget_sql

    with Reading(settings) as reading:
        return forget_sql.stored(reading.store, reading.user)


def scrub(settings: Settings) -> bool:
    """Deleted rows scrubbed out of the store (VACUUM); False when another process's read kept it from running."""
    from nemori_cli.store import forget as forget_sql

    with Reading(settings, write=True) as reading:
        return forget_sql.make_physical(reading.store, vacuum=True)
