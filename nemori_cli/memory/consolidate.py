"""Stage 7: consolidation (native management). Is a new fact new, a merge, or a conflict?

For each new fact, the top K_m similar active facts above a similarity floor
are its candidates (none: it is new, without a call).

- **merge**: a candidate with the same normalised text, or nearly identical
  by embedding, says the same thing. The more informative (longer) sentence
  is kept: the old fact gains a source, or the new one supersedes it and
  carries both facts' sources. Decided without the model.
- **conflict**: for each remaining candidate that names the same people, the
  model answers one yes/no question: does the new fact make it outdated?
  Every yes is superseded by the new fact, with the reason.
- **new**: otherwise.

The yes/no answers are only trusted from a model that passes a self-check on
two fixed pairs (once per run); a model that fails it (the 0.5B default
answers yes to everything) retires nothing, and that is logged as a fallback.
Superseded facts keep their rows with what replaced them, when and why; in
conversation time they stay valid until their successor's episode (valid_until).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nemori_cli import stages
from nemori_cli.domain import Fact
from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.memory.semantic import names_in
from nemori_cli.prompts import consolidate as prompt
from nemori_cli.store import facts as fact_sql
from nemori_cli.store.contract import Store

STAGE = stages.CONSOLIDATION


@dataclass(frozen=True)
class ConsolidationSettings:
    candidates: int = 5  # the paper's K_m
    floor: float = 0.45  # cosine similarity below which a known fact is not a candidate
    duplicate: float = 0.92  # at or above this similarity two facts say the same
    max_questions: int = 3  # yes/no calls per new fact, most similar candidates first


@dataclass(frozen=True)
class Decision:
    action: str  # new | merge | conflict | duplicate
    targets: tuple[int, ...] = ()
    text: str = ""  # the text to store


def _normal(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


class Consolidator:
    """Decides for one run; remembers whether the model passed the self-check."""

    def __init__(self, llm: StructuredLLM, settings: ConsolidationSettings = ConsolidationSettings()):
        self.llm, self.settings = llm, settings
        self._trusted: bool | None = None

    def trusted(self) -> bool:
        if self._trusted is None:
            self._trusted = all(self._outdated(older, newer) is expected for older, newer, expected in prompt.SELF_CHECK)
            if not self._trusted:
                self.llm.log.fallback(
                    STAGE, f"model {self.llm.model_id} failed the outdated-fact self-check; no fact is retired in this run"
                )
        return self._trusted

    def _outdated(self, older: str, newer: str) -> bool | None:
        try:
            return self.llm.complete(prompt.render(older, newer), schema=prompt.Outdated, stage=STAGE).value.outdated
        except LLMOutputError as e:
            self.llm.log.fallback(STAGE, f"{e.message}; treated as not outdated")
            return None

    def _outdated_each(self, older: list[str], newer: str) -> list[bool | None]:
        """`_outdated` for each older fact, the questions asked together where the backend can (they are independent)."""
        answers = self.llm.complete_together([prompt.render(o, newer) for o in older], schema=prompt.Outdated, stage=STAGE)
        verdicts: list[bool | None] = []
        for answer in answers:
            if isinstance(answer, LLMOutputError):
                self.llm.log.fallback(STAGE, f"{answer.message}; treated as not outdated")
                verdicts.append(None)
            else:
                verdicts.append(answer.value.outdated)
        return verdicts

    def decide(self, db: Store, user: str, fact: str, vector: np.ndarray) -> Decision:
        s = self.settings
        hits = [(i, sim) for i, sim in fact_sql.vector_search(db, user, vector, s.candidates) if sim >= s.floor]
        if not hits:
            return Decision("new", text=fact)
        known = fact_sql.by_ids(db, user, [i for i, _ in hits])
        shown: list[tuple[Fact, float]] = [(known[i], sim) for i, sim in hits if i in known]
        for f, sim in shown:
            if sim >= s.duplicate or _normal(f.text) == _normal(fact):
                return self._merge(f, fact)
        names = names_in(fact)
        related = [f for f, _ in shown if not names or names & names_in(f.text)][: s.max_questions]
        if not related or not self.trusted():
            return Decision("new", text=fact)
        outdated = tuple(f.id for f, yes in zip(related, self._outdated_each([f.text for f in related], fact)) if yes)
        if not outdated:
            self.llm.log.decision(STAGE, f"'{fact}': new (outdates none of {_ids(related)})")
            return Decision("new", text=fact)
        self.llm.log.decision(STAGE, f"'{fact}': conflict, outdates {', '.join(f'F{i}' for i in outdated)}")
        return Decision("conflict", outdated, fact)

    def _merge(self, known: Fact, fact: str) -> Decision:
        if len(_normal(fact)) > len(_normal(known.text)):
            self.llm.log.decision(STAGE, f"'{fact}': merge, says more than F{known.id}")
            return Decision("merge", (known.id,), fact)
        self.llm.log.decision(STAGE, f"'{fact}': same as F{known.id}, source added")
        return Decision("duplicate", (known.id,), known.text)


def _ids(facts: list[Fact]) -> str:
    return ", ".join(f"F{f.id}" for f in facts)


def apply(db: Store, user: str, decision: Decision, vector: np.ndarray, episode_id: int) -> int:
    """Write a decision (caller holds the transaction); returns the id of the fact that now holds it."""
    if decision.action == "duplicate":
        (target,) = decision.targets
        fact_sql.add_sources(db, target, [episode_id])
        return target
    if decision.action == "new":
        return fact_sql.add(db, user, decision.text, vector, [episode_id], episode_id=episode_id)
    if decision.action == "conflict":
        new_id = fact_sql.add(db, user, decision.text, vector, [episode_id], origin="conflict", episode_id=episode_id)
        fact_sql.supersede(db, user, list(decision.targets), new_id, f"outdated by F{new_id} (from episode E{episode_id}): {decision.text}")
        return new_id
    sources = sorted({e for f in fact_sql.by_ids(db, user, list(decision.targets)).values() for e in f.source_episode_ids} | {episode_id})
    # Made from this episode (it is valid from its end), carrying its predecessors' sources as provenance.
    new_id = fact_sql.add(db, user, decision.text, vector, sources, origin="merge", episode_id=episode_id)
    fact_sql.supersede(db, user, list(decision.targets), new_id, f"merged into F{new_id}, which says more (from episode E{episode_id})")
    return new_id
