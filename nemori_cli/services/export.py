"""`nemori export` and `nemori import-memory`'s reads and writes: one user's memory as records, as a journal's contents, and back in."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nemori_cli.config import Settings
from nemori_cli.domain import Episode, Fact, Message, Note
from nemori_cli.store.contract import Store


def header(store: Store, version: str) -> dict[str, Any]:
    """What a reader sees first: this nemori (``version``), the embedder, and how the memory was built (the restore reads `meta`, not these)."""
    from nemori_cli.memory.method import describe
    from nemori_cli.memory.profile import stored

    profile = stored(store)
    return {
        "nemori": version,
        "embedder": store.embedder_identity(),
        "profile": asdict(profile) if profile else None,
        "method": describe(profile) if profile else None,
    }


def records(store: Store, user: str, version: str) -> Iterator[dict[str, Any]]:
    """The lossless export (store/export.py): the header, every row, and the closing counts, as of one commit."""
    from nemori_cli.store import export

    return export.stream(store, user, header(store, version))


@dataclass(frozen=True)
class Contents:
    """What the journal is written from (cli/journal.py)."""

    user: str
    episodes: list[Episode]  # every episode, merged ones too (a replaced fact's successor may come from one)
    facts: list[Fact]  # every fact, superseded ones too
    notes: list[Note] = field(default_factory=list)
    summary: str | None = None  # the latest running summary (--memory summary)
    pending: int = 0  # messages the memory has not been made from yet
    unbuilt: list[Message] = field(default_factory=list)  # those messages, oldest first (shown as said until built)


def contents(store: Store, user: str) -> Contents:
    """Everything the journal shows, as of one commit."""
    from nemori_cli.memory.method import mode_of
    from nemori_cli.store import episodes, facts, notes, summaries

    with store.snapshot():
        latest = summaries.latest(store, user)
        mode = mode_of(store)  # what "not built yet" means depends on the memory mode
        return Contents(
            user=user,
            episodes=episodes.list_all(store, user, include_superseded=True),
            facts=facts.list_all(store, user, include_superseded=True),
            notes=notes.list_all(store, user),
            summary=latest[1] if latest else None,
            pending=mode.backlog(store, user).messages,
            unbuilt=mode.unbuilt(store, user),
        )


@dataclass(frozen=True)
class Restored:
    user: str
    counts: dict[str, int]  # rows per table
    schema: int  # the export's schema
    newest: int  # this nemori's schema, which the store is at now


def restore(source: Path, settings: Settings) -> Restored:
    """The export at ``source`` restored into the settings' store (new or empty; store/restore.py)."""
    from nemori_cli.store import restore as restore_sql

    done = restore_sql.restore(source, settings.store)
    return Restored(done.user, done.counts, done.schema, restore_sql.NEWEST)
