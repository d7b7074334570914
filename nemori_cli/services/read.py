"""The read side: what `inspect`, `stats`, `view` and `forget`'s question read from one user's memory.

The interfaces take what these return (records of domain.py, plain dicts)
and render it; they hold a ``Reading``'s store only to hand it back here.
Every call reads as of one commit where it reads more than one statement.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nemori_cli import deps
from nemori_cli.config import Settings
from nemori_cli.domain import Episode, Fact, Message, Note, NoteChange, PredictionRecord
from nemori_cli.store.contract import Store


class Reading:
    """One command's look at a memory: the settings, and the store opened for reading (never created; a missing one is a StoreError)."""

    def __init__(self, settings: Settings, *, write: bool = False):
        self._session = deps.session(settings, write=write)

    @property
    def settings(self) -> Settings:
        return self._session.settings

    @property
    def user(self) -> str:
        return self._session.user

    @property
    def store(self) -> Store:
        return self._session.db

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> Reading:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def reading(settings: Settings) -> Reading:
    return Reading(settings)


# -- one item by id (`inspect episode|fact|note`) -----------------------------------


def episode(store: Store, user: str, episode_id: int, *, with_parts: bool = True) -> tuple[Episode, list[Episode]] | None:
    """The episode (with its messages) and the parts merged into it (not looked up without ``with_parts``); None when the user has none by that id."""
    from nemori_cli.store import episodes as episode_sql

    e = episode_sql.get(store, user, episode_id)
    if e is None:
        return None
    return e, episode_sql.parts(store, user, e.id) if with_parts else []


def note(store: Store, user: str, note_id: int) -> tuple[Note, tuple[dict[int, Note], list[NoteChange], list[NoteChange]]] | None:
    """The note, the notes it links to, its own history, and the changes its arrival made."""
    from nemori_cli.store import notes as note_sql

    n = note_sql.get(store, user, note_id)
    if n is None:
        return None
    linked = note_sql.by_ids(store, user, list(n.links))
    return n, (linked, note_sql.history(store, n.id), note_sql.caused_by(store, n.id))


@dataclass(frozen=True)
class FactView:
    """A fact and why it exists (`inspect fact`, the view's audit)."""

    fact: Fact
    sources: dict[int, Episode]
    replaced: list[Fact]
    episode: Episode | None  # the one it was distilled from
    prediction: PredictionRecord | None
    recorded_since: int  # the schema version that began keeping predictions


def fact(store: Store, user: str, fact_id: int) -> FactView | None:
    """The fact, its sources, what it replaced, and the prediction its episode was distilled against, in one snapshot."""
    from nemori_cli.store import episodes as episode_sql
    from nemori_cli.store import facts as fact_sql
    from nemori_cli.store import predictions as prediction_sql

    with store.snapshot():
        f = fact_sql.get(store, user, fact_id)
        if f is None:
            return None
        sources = episode_sql.by_ids(store, user, list(f.source_episode_ids))
        made_from = f.episode_id
        made = episode_sql.get(store, user, made_from, with_messages=False) if made_from is not None else None
        prediction = prediction_sql.get(store, user, made_from) if made_from is not None else None
        return FactView(f, sources, fact_sql.replaced(store, user, f.id), made, prediction, prediction_sql.SCHEMA)


# -- lists --------------------------------------------------------------------------


def episodes(store: Store, user: str, *, as_of: datetime | None = None) -> list[Episode]:
    """The episodes in time order, without their messages (as of ``as_of``: those that had ended by then)."""
    from nemori_cli.store import episodes as episode_sql

    return episode_sql.list_all(store, user, as_of=as_of)


def facts(store: Store, user: str, *, as_of: datetime | None = None) -> list[Fact]:
    """Every fact, superseded ones too (as of ``as_of``: those valid then)."""
    from nemori_cli.store import facts as fact_sql

    return fact_sql.list_all(store, user, include_superseded=True, as_of=as_of)


def summaries(store: Store, user: str) -> list[dict[str, Any]]:
    """Every version of the running summary, oldest first."""
    from nemori_cli.store import summaries as summary_sql

    return summary_sql.history(store, user)


def messages(store: Store, user: str, *, pending_only: bool = False, limit: int | None = None) -> list[Message]:
    """The stored messages, with the episode that owns each (``pending_only``: those no episode owns yet)."""
    from nemori_cli.store import messages as message_sql

    return message_sql.all_messages(store, user, pending_only=pending_only, limit=limit)


def unbuilt(store: Store, user: str) -> list[Message]:
    """The messages not built into the memory yet, oldest first (what that means depends on the memory mode)."""
    from nemori_cli.memory.method import mode_of

    with store.snapshot():
        return mode_of(store).unbuilt(store, user)


def overview(store: Store, user: str) -> dict[str, Any]:
    """What `nemori view` opens with: the counts and the span of the conversation."""
    from nemori_cli.store import messages as message_sql
    from nemori_cli.store import stats

    with store.snapshot():
        counts = stats.counts(store, user)
        first, last = message_sql.span(store, user)
    return {"user": user, "store": str(store.path), "counts": counts, "first": first, "last": last}


# -- stats ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Stats:
    info: dict[str, Any]  # what `stats --json` prints
    built: Any  # pipeline/built.BuildState: how much is built, and what the rest needs


def stats(reading: Reading) -> Stats:
    """What memory holds, how much is built (with the time the rest needs and a running build), and what building cost."""
    from nemori_cli.memory.method import describe, mode_of, resolve
    from nemori_cli.memory.profile import stored
    from nemori_cli.pipeline import built, lock
    from nemori_cli.store import stats as stats_sql
    from nemori_cli.store import telemetry

    settings, store, u = reading.settings, reading.store, reading.user
    mode = mode_of(store)  # what is pending depends on how the memory is built
    counts = stats_sql.counts(store, u, pending=lambda d, user: mode.backlog(d, user).messages)
    stages = telemetry.stage_stats(store, u)
    holder = lock.for_settings(settings).holder()
    state = built.state(store, u, resolve(store, {}), eta=deps.build_eta(settings, store), worker_pid=holder.pid if holder else None)
    profile = stored(store)
    info = {
        "db": settings.store_name,
        "db_bytes": store.size_bytes(),
        "schema_version": store.schema_version(),
        "embedder": store.embedder_identity(),
        "profile": describe(profile) if profile else None,
        "user": u,
        "counts": counts,
        "built": state.as_json(),
        "stages": stages,
    }
    return Stats(info, state)
