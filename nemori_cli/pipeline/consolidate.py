"""Stage 7: consolidation (native management). Is a new fact new, a merge, or a conflict?

For each new fact, the top K_m similar active facts are offered to the model,
which answers new, merge (targets and one merged sentence) or conflict (the
targets it makes untrue), its targets constrained to the ids shown.
Deterministic steps around it keep a small model honest and cheap:

- no candidate above a similarity floor: new, without a call;
- a candidate with the same normalised text, or nearly identical by
  embedding: the same fact, which only gains a source, without a call;
- merge or conflict with no targets is demoted to new; a conflict target that
  shares no name with the new fact is dropped (a move of Ann's says nothing
  about Bob); a merge with no usable merged sentence keeps both facts.

Superseded facts keep their rows with what replaced them, when and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nemori_cli.domain import Fact
from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.pipeline.semantic import names_in
from nemori_cli.prompts import consolidate as prompt
from nemori_cli.store import facts as fact_sql
from nemori_cli.store.db import Database

STAGE = "consolidation"


@dataclass(frozen=True)
class ConsolidationSettings:
    candidates: int = 5  # the paper's K_m
    floor: float = 0.55  # cosine similarity below which a known fact is not offered
    duplicate: float = 0.97  # at or above this similarity two facts say the same


@dataclass(frozen=True)
class Decision:
    action: str  # new | merge | conflict | duplicate
    targets: tuple[int, ...] = ()
    text: str = ""  # what to store: the fact itself, or the merged sentence


def _normal(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def decide(
    db: Database, user: str, llm: StructuredLLM, fact: str, vector: np.ndarray, settings: ConsolidationSettings = ConsolidationSettings()
) -> Decision:
    hits = [(i, s) for i, s in fact_sql.vector_search(db, user, vector, settings.candidates) if s >= settings.floor]
    if not hits:
        return Decision("new", text=fact)
    known = fact_sql.by_ids(db, user, [i for i, _ in hits])
    shown: list[Fact] = [known[i] for i, _ in hits if i in known]
    for (fact_id, similarity), f in zip(hits, shown):
        if similarity >= settings.duplicate or _normal(f.text) == _normal(fact):
            llm.log.decision(STAGE, f"'{fact}' is the same as F{fact_id}: source added")
            return Decision("duplicate", (fact_id,), f.text)
    try:
        answer = llm.complete(prompt.render(fact, shown), schema=prompt.schema_for(tuple(f.id for f in shown)), stage=STAGE, max_tokens=90).value
    except LLMOutputError as e:
        llm.log.fallback(STAGE, f"{e.message}; kept as a new fact")
        return Decision("new", text=fact)
    decision = _repaired(llm, fact, answer.action, tuple(dict.fromkeys(answer.targets)), answer.merged.strip(), {f.id: f for f in shown})
    targets = ",".join(f"F{t}" for t in decision.targets)
    llm.log.decision(STAGE, f"'{fact}': {decision.action}{' ' + targets if targets else ''}")
    return decision


def _repaired(llm: StructuredLLM, fact: str, action: str, targets: tuple[int, ...], merged: str, shown: dict[int, Fact]) -> Decision:
    if action == "new":
        return Decision("new", text=fact)
    if not targets:
        llm.log.repaired(STAGE, f"{action} named no fact; kept as new")
        return Decision("new", text=fact)
    if action == "conflict":
        names = names_in(fact)
        related = tuple(t for t in targets if names & names_in(shown[t].text) or not names)
        if len(related) < len(targets):
            llm.log.repaired(STAGE, f"conflict with facts naming other people ignored ({len(targets) - len(related)})")
        if not related:
            return Decision("new", text=fact)
        return Decision("conflict", related, fact)
    if len(merged) < 12:
        llm.log.repaired(STAGE, "merge without a merged sentence; kept as new")
        return Decision("new", text=fact)
    return Decision("merge", targets, merged)


def apply(
    db: Database, user: str, decision: Decision, vector: np.ndarray, episode_id: int, embed_text
) -> int:
    """Write a decision (caller holds the transaction); returns the id of the fact that now holds it.

    ``embed_text`` embeds a merged sentence, which is new text with no vector yet.
    """
    if decision.action == "duplicate":
        (target,) = decision.targets
        fact_sql.add_sources(db, target, [episode_id])
        return target
    if decision.action == "new":
        return fact_sql.add(db, user, decision.text, vector, [episode_id])
    if decision.action == "conflict":
        new_id = fact_sql.add(db, user, decision.text, vector, [episode_id], origin="conflict")
        fact_sql.supersede(db, user, list(decision.targets), new_id, f"contradicted by F{new_id} (from episode E{episode_id}): {decision.text}")
        return new_id
    sources = sorted({e for f in fact_sql.by_ids(db, user, list(decision.targets)).values() for e in f.source_episode_ids} | {episode_id})
    new_id = fact_sql.add(db, user, decision.text, embed_text(decision.text), sources, origin="merge")
    fact_sql.supersede(db, user, list(decision.targets), new_id, f"merged into F{new_id} with a fact from episode E{episode_id}")
    return new_id
