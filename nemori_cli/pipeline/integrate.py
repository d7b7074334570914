"""Stage 4: associative integration. Does a new episode continue an earlier one?

Candidates are the top K_e active episodes of the same user by embedding.
Deterministic guards keep a small model from gluing unrelated memories
together: a candidate must be similar enough (a cosine floor), close enough
in time, and small enough that the merged episode stays readable. With no
candidate left, no call is spent. The model then picks one candidate or none,
constrained to the ids it was shown; a merge is written by the model too, and
falls back to joining the two narratives when its answer is unusable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nemori_cli import stages
from nemori_cli.domain import Episode, to_epoch
from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.pipeline.narrate import repair_narrative
from nemori_cli.prompts import integrate as prompt
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store.contract import Store
from nemori_cli.store.episodes import EpisodeDraft

STAGE = stages.INTEGRATION


@dataclass(frozen=True)
class IntegrationSettings:
    candidates: int = 5  # the paper's K_e
    floor: float = 0.45  # cosine similarity below which an episode is not offered at all
    max_gap_days: float = 7.0  # a continuation picks up within a week, not months later
    max_messages: int = 40  # a merged episode larger than this is no longer one event


def candidates(db: Store, user: str, draft: EpisodeDraft, vector: np.ndarray, settings: IntegrationSettings) -> list[Episode]:
    hits = [(i, s) for i, s in episode_sql.vector_search(db, user, vector, settings.candidates) if s >= settings.floor]
    found = episode_sql.by_ids(db, user, [i for i, _ in hits])
    kept = []
    for episode_id, _ in hits:
        e = found.get(episode_id)
        if e is None:
            continue
        if abs(to_epoch(draft.start) - to_epoch(e.end)) > settings.max_gap_days * 86400:
            continue
        if episode_sql.message_count(db, user, e.id) + len(draft.message_ids) > settings.max_messages:
            continue
        kept.append(e)
    return kept


class SelfCheck:
    """Whether this run's model can be trusted to choose (asked once, lazily)."""

    def __init__(self, llm: StructuredLLM):
        self.llm = llm
        self._passed: bool | None = None

    def passed(self) -> bool:
        if self._passed is None:
            d = prompt.CHECK_DATE
            self._passed = all(_continues(self.llm, (t0, n0, d), (t1, n1, d)) is expected for t0, n0, t1, n1, expected in prompt.SELF_CHECK)
            if self._passed:
                self.llm.log.decision(STAGE, f"model {self.llm.model_id} passed the continuation self-check")
            else:
                self.llm.log.fallback(
                    STAGE, f"model {self.llm.model_id} failed the continuation self-check; no episode is merged in this run"
                )
        return self._passed


def _continues(llm: StructuredLLM, earlier: tuple, new: tuple) -> bool | None:
    try:
        return llm.complete(prompt.render_pair(earlier, new), schema=prompt.Continuation, stage=STAGE).value.same_event
    except LLMOutputError as e:
        llm.log.fallback(STAGE, f"{e.message}; treated as no continuation")
        return None


def choose(llm: StructuredLLM, draft: EpisodeDraft, shown: list[Episode], max_questions: int = 3) -> Episode | None:
    """The episode the new one continues (the first yes, most similar first), or None; logged."""
    new = (draft.title, draft.narrative, draft.start)
    asked = shown[:max_questions]
    for e in asked:
        if _continues(llm, (e.title, e.narrative, e.start), new):
            llm.log.decision(STAGE, f"'{draft.title}' continues E{e.id}")
            return e
    llm.log.decision(STAGE, f"'{draft.title}' continues none of {', '.join(f'E{e.id}' for e in asked)}")
    return None


def merge(llm: StructuredLLM, old: Episode, draft: EpisodeDraft) -> EpisodeDraft:
    """One draft covering both parts. It lists the new part's messages; supersede() moves the old part's."""
    try:
        answer = llm.complete(
            prompt.render_merge(old.title, old.narrative, old.start, draft.title, draft.narrative, draft.start),
            schema=prompt.MergedEpisode,
            stage=stages.MERGE,
        ).value
        start = min(old.start, draft.start, key=to_epoch)
        title, narrative = repair_narrative(answer.title.strip(), answer.narrative.strip(), start, old.title, llm, STAGE)
    except LLMOutputError as e:
        llm.log.fallback(STAGE, f"{e.message}; merged by joining the two narratives")
        title, narrative = old.title, f"{old.narrative} {draft.narrative}"
    return EpisodeDraft(
        title=title,
        narrative=narrative,
        start=min(old.start, draft.start, key=to_epoch),
        end=max(old.end, draft.end, key=to_epoch),
        boundary="merged",
        message_ids=draft.message_ids,
    )
