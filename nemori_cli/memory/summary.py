"""Management mode `summary`: one running summary, rewritten as each episode arrives.

Every version is kept (a row each), so the summary's history can be read and
a bad rewrite is never the only copy. When the model's answer is unusable,
the episode's title is appended as a dated line instead (counted), and the
oldest lines go first if that grows past the limit.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from nemori_cli import stages
from nemori_cli.dates import format_date
from nemori_cli.domain import Hit
from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.memory.mode import MemoryAdded, MemoryMode, NewEpisode, Worker, WorkerInputs
from nemori_cli.prompts import summary as prompt
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import summaries
from nemori_cli.store.contract import Store
from nemori_cli.store.episodes import EpisodeDraft

if TYPE_CHECKING:
    from nemori_cli.memory.profile import Profile

STAGE = stages.SUMMARY


def current(db: Store, user: str) -> tuple[int, str] | None:
    """(version id, text) of the latest summary, or None before the first episode."""
    return summaries.latest(db, user)


def fold_in(db: Store, user: str, llm: StructuredLLM, draft: EpisodeDraft, episode_id: int) -> None:
    """Rewrite the summary to cover one more episode and store it as a new version (caller holds the transaction)."""
    latest = current(db, user)
    before = latest[1] if latest else None
    try:
        text = llm.complete(
            prompt.render(before, draft.title, draft.narrative, draft.start), schema=prompt.Summary, stage=STAGE
        ).value.summary
    except LLMOutputError as e:
        llm.log.fallback(STAGE, f"{e.message}; appended the episode's title")
        lines = (before.splitlines() if before else []) + [f"{format_date(draft.start.date())}: {draft.title}"]
        while len("\n".join(lines)) > prompt.SUMMARY_MAX and len(lines) > 1:
            lines.pop(0)
        text = "\n".join(lines)
    summaries.add(db, user, text, episode_id)


class _SummaryWorker(Worker):
    def __init__(self, inputs: WorkerInputs):
        self.inputs = inputs

    def after_episode(self, episode: NewEpisode) -> MemoryAdded:
        fold_in(self.inputs.db, self.inputs.user, self.inputs.llm, episode.draft, episode.id)
        return MemoryAdded()


class Summary(MemoryMode):
    """One running summary instead of facts."""

    name = "summary"
    distils_facts = False
    kinds = frozenset({"summary"})

    def normalise(self, profile: Profile) -> Profile:
        from dataclasses import replace

        return replace(profile, facts=False) if profile.facts else profile  # the summary takes the place of facts

    def episode_stages(self, profile: Profile) -> tuple[str, ...]:
        return (STAGE.name,)

    def start(self, profile: Profile, inputs: WorkerInputs) -> Worker:
        return _SummaryWorker(inputs)

    def always_shown(self, db: Store, user: str, *, as_of: datetime | None = None) -> list[Hit]:
        """The latest summary (as of ``as_of``), dated by the span of the live episodes, shown with every answer."""
        latest = summaries.latest(db, user, as_of=as_of)
        span = episode_sql.active_span(db, user, as_of=as_of) if latest else None
        if latest is None or span is None:
            return []
        version, text = latest
        return [Hit(kind="summary", id=version, score=0.0, title="summary", text=text, start=span[0], end=span[1])]
