"""What a memory mode is: the one object that says how a database's memory is made and read.

A mode is chosen once, from the profile stored in the database
(memory/modes.py: ``for_profile(profile)``), and then asked, never compared by name:

- how it is described and which flags apply to it (``normalise``, ``flags``);
- which LLM stages an ingest runs (``stages``, for the estimator and reports);
- what is pending (``backlog``): the stored messages it has not made memory of;
- what happens after each episode, or to each message for a mode that makes
  no episodes (``start`` returns the per-run worker);
- what it adds to retrieval (``kinds``, ``always_shown``).

The runner owns transactions, budgets, the call log and progress; a mode's
worker only decides and writes inside the transaction it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from nemori_cli.domain import Backlog, Hit, Message
from nemori_cli.embed.base import Embedder
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.memory.amem import AmemSettings, NotePlan
from nemori_cli.memory.consolidate import ConsolidationSettings
from nemori_cli.memory.semantic import SemanticSettings
from nemori_cli.store import messages as message_sql
from nemori_cli.store.contract import Store
from nemori_cli.store.episodes import EpisodeDraft

if TYPE_CHECKING:
    from nemori_cli.memory.profile import Profile


@dataclass(frozen=True)
class WorkerInputs:
    """What a mode's worker is handed for one ingest run: the store, the user, the models and the settings."""

    db: Store
    user: str
    llm: StructuredLLM
    embedder: Embedder
    semantic: SemanticSettings = SemanticSettings()
    consolidation: ConsolidationSettings = ConsolidationSettings()
    notes: AmemSettings = AmemSettings()


@dataclass(frozen=True)
class NewEpisode:
    """An episode just stored (its transaction still open), as a mode sees it."""

    id: int  # the live id: the merged episode's when it continued an earlier one
    draft: EpisodeDraft
    messages: tuple[Message, ...]
    vector: np.ndarray


@dataclass(frozen=True)
class MemoryAdded:
    """How many facts and notes a mode's worker added for one episode or message, for the ingest report."""

    facts: int = 0
    notes: int = 0


class Worker:
    """A mode's per-run state (self-checks passed, note builders); one per ingest run."""

    def after_episode(self, episode: NewEpisode) -> MemoryAdded:
        """Make this mode's memory of one new episode; the caller holds the transaction."""
        return MemoryAdded()

    def state_outside_store(self) -> list[object]:
        """Objects holding what this run keeps outside the store (a self-check's verdict, asked once per run).

        A unit of work may be rolled back and run again (llm/inflight.ReplayBackend):
        the runner saves these objects' attributes before it and puts them back
        if it is rolled back, so what is learned, and logged, is learned once.
        """
        return []

    # Modes that make no episodes take messages one at a time instead: the
    # model's decisions first, outside the write lock, then the write inside it
    # (A-MEM's notes, the one such mode: its plan is a NotePlan).
    def plan_message(self, message: Message) -> NotePlan:
        raise NotImplementedError

    def write_message(self, plan: NotePlan) -> MemoryAdded | None:
        """Store a planned message's memory (the caller holds the transaction); None when another process did meanwhile."""
        raise NotImplementedError


class MemoryMode:
    """The defaults are an episodic mode's: episodes from the pending buffer, searched with their raw turns."""

    name: str = ""
    makes_episodes = True  # False: one unit of memory per raw message, no episodes at all
    distils_facts = True  # whether --facts/--no-facts applies
    kinds: frozenset[str] = frozenset()  # hit kinds it adds to retrieval besides episodes and raw turns
    # Whether `ask` answers from the cached core of raw turns and facts (retrieval/core_answer.py)
    # by default, or from this mode's own retrieval (the budget road).
    reads_core = True

    def normalise(self, profile: Profile) -> Profile:
        """The profile this mode runs with (flags that cannot apply are reset or refused)."""
        return profile

    def flags(self, profile: Profile) -> list[str]:
        """The flags that describe a memory built this way, as a user would type them."""
        parts = [f"--memory {self.name}"]
        if self.distils_facts:
            parts.append("--facts" if profile.facts else "--no-facts")
        if profile.facts:
            parts.append(f"--distill {profile.distill}")
        parts.append("--integrate" if profile.integrate else "--no-integrate")
        parts.append(f"--index {profile.index}")
        parts.append(f"--partition {profile.partition}")
        return parts

    def stages(self, profile: Profile) -> tuple[str, ...]:
        """The LLM stages an ingest runs, in the method's order."""
        run = ["partition", "narration"] if profile.partition == "model" else ["narration"]
        if profile.integrate:
            run.append("integration")
        return (*run, *self.episode_stages(profile))

    def episode_stages(self, profile: Profile) -> tuple[str, ...]:
        """The stages this mode adds after each episode."""
        return ()

    def message_calls(self, messages: int) -> dict[str, int]:
        """LLM calls for ``messages`` messages, for a mode that makes no episodes (estimate.py)."""
        raise NotImplementedError

    def backlog(self, db: Store, user: str) -> Backlog:
        """The stored messages this mode has not made memory of yet: messages no episode owns."""
        return message_sql.backlog(db, user)

    def unbuilt(self, db: Store, user: str, limit: int | None = None) -> list[Message]:
        """The messages ``backlog`` counts, oldest first: until they are built they are the memory (journal, view, stats)."""
        return message_sql.pending(db, user, limit)

    def first_waiting(self, db: Store, user: str) -> float | None:
        """When the oldest message this mode has not made memory of was said (epoch seconds); None when there is none."""
        return message_sql.first_pending_epoch(db, user)

    def waiting(self, db: Store, user: str, limit: int) -> list[int]:
        """Ids of pending messages, oldest first, for a mode that makes no episodes."""
        raise NotImplementedError

    def start(self, profile: Profile, inputs: WorkerInputs) -> Worker:
        return Worker()

    def searches_raw_turns(self, db: Store, user: str) -> bool:
        """Whether raw turns are searched as hits of their own (not when each unit of memory already is one)."""
        return True

    def always_shown(self, db: Store, user: str, *, as_of: datetime | None = None) -> list[Hit]:
        """Hits shown with every answer whatever was retrieved (the running summary), as memory stood at ``as_of``."""
        return []
