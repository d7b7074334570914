"""The Nemori paper's semantic memory, and its no-consolidation ablation.

native: after each episode, facts distilled by prediction error
(memory/semantic.py), each consolidated against what is known (new, merge,
conflict: memory/consolidate.py). naive-rag: the same facts appended as they
come, with no consolidation, the paper's baseline for what consolidation buys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nemori_cli.memory import consolidate, semantic
from nemori_cli.memory.mode import MemoryAdded, MemoryMode, NewEpisode, Worker, WorkerInputs
from nemori_cli.store import facts as fact_sql

if TYPE_CHECKING:
    from nemori_cli.memory.profile import Profile


class _FactWorker(Worker):
    def __init__(self, profile: Profile, inputs: WorkerInputs, *, consolidated: bool):
        self.profile, self.inputs = profile, inputs
        self.consolidator = consolidate.Consolidator(inputs.llm, inputs.consolidation) if consolidated else None

    def state_outside_store(self) -> list[object]:
        return [self.consolidator] if self.consolidator is not None else []

    def after_episode(self, episode: NewEpisode) -> MemoryAdded:
        if not self.profile.facts:
            return MemoryAdded()  # --no-facts: episodes only (the paper's 'w/o semantic memory')
        t = self.inputs
        made = semantic.distill(t.db, t.user, t.llm, episode.draft.title, list(episode.messages), episode.vector, t.semantic)
        semantic.record(t.db, t.user, episode.id, made)  # in this episode's transaction, with its facts
        texts = made.facts
        if not texts:
            return MemoryAdded()
        for text, vector in zip(texts, t.embedder.embed_documents(texts)):
            if self.consolidator is None:
                fact_sql.add(t.db, t.user, text, vector, [episode.id], episode_id=episode.id)
                continue
            decision = self.consolidator.decide(t.db, t.user, text, vector)
            consolidate.apply(t.db, t.user, decision, vector, episode.id)
        return MemoryAdded(facts=len(texts))


def _fact_stages(profile: Profile, *, consolidated: bool) -> tuple[str, ...]:
    if not profile.facts:
        return ()
    run = ["prediction"] if profile.distill == "prediction" else []
    run.append("distillation")
    if consolidated:
        run.append("consolidation")
    return tuple(run)


class Native(MemoryMode):
    """Facts by prediction error, consolidated (new / merge / conflict)."""

    name = "native"
    kinds = frozenset({"fact"})
    consolidated = True

    def episode_stages(self, profile: Profile) -> tuple[str, ...]:
        return _fact_stages(profile, consolidated=self.consolidated)

    def start(self, profile: Profile, inputs: WorkerInputs) -> Worker:
        return _FactWorker(profile, inputs, consolidated=self.consolidated)


class NaiveRag(Native):
    """The same facts appended with no consolidation."""

    name = "naive-rag"
    consolidated = False
