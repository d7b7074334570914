"""Stages 5-6: semantic memory by prediction error.

For a new episode: evoke what memory already knows (facts above a cosine
threshold); if anything is evoked, predict the episode from its title and that
knowledge only; then keep as facts only what the raw messages hold that the
prediction missed or got wrong. With nothing evoked there is nothing to
predict from, so no prediction call is spent and everything new is distilled.

Deterministic passes: relative times in facts get their absolute dates; a fact
naming a capitalised word found nowhere in the messages (an invented name or
place) is dropped and counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nemori_cli import stages
from nemori_cli.domain import Message
from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.dates import annotate_relative_times
from nemori_cli.prompts import distill as distill_prompt
from nemori_cli.prompts import predict as predict_prompt
from nemori_cli.store import facts as fact_sql
from nemori_cli.store.db import Database

PREDICTION = stages.PREDICTION
DISTILLATION = stages.DISTILLATION

_CAPITALISED = re.compile(r"\b[A-Z][a-zA-Z]+\b")
_ALWAYS_OK = set(
    "I The A An On In At By For To He She They We It His Her Their Our My This That These Those "
    "January February March April May June July August September October November December "
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
)


@dataclass(frozen=True)
class SemanticSettings:
    evoke_k: int = 10  # the paper's K_s
    threshold: float = 0.70  # the paper's tau: cosine similarity, not distance
    direct: bool = False  # the "Nemori-s" ablation: extract from the raw episode, no prediction


def names_in(text: str) -> set[str]:
    """Capitalised words that are not sentence furniture: people, places, things with names."""
    return {w for w in _CAPITALISED.findall(text) if w not in _ALWAYS_OK}


def ungrounded(fact: str, source_text: str) -> list[str]:
    """Capitalised words of a fact that the source never mentions."""
    return [w for w in _CAPITALISED.findall(fact) if w not in _ALWAYS_OK and w.lower() not in source_text]


def distill_facts(
    db: Database,
    user: str,
    llm: StructuredLLM,
    title: str,
    messages: list[Message],
    episode_vector: np.ndarray,
    settings: SemanticSettings = SemanticSettings(),
    *,
    evoke=None,
) -> list[str]:
    """New facts for one episode (possibly none), every outcome counted.

    ``evoke`` looks up what memory already knows (default: the facts table;
    --memory nemori+amem passes its notes' lookup).
    """
    evoke = evoke or fact_sql.evoke
    known = [] if settings.direct else evoke(db, user, episode_vector, k=settings.evoke_k, threshold=settings.threshold)
    prediction = None
    if known:
        try:
            prediction = llm.complete(
                predict_prompt.render(title, known), schema=predict_prompt.Prediction, stage=PREDICTION
            ).value.prediction
        except LLMOutputError as e:
            llm.log.fallback(PREDICTION, f"{e.message}; distilling without a prediction")
    try:
        facts = llm.complete(
            distill_prompt.render(messages, prediction, direct=settings.direct), schema=distill_prompt.Distilled, stage=DISTILLATION
        ).value.facts
    except LLMOutputError as e:
        llm.log.fallback(DISTILLATION, f"{e.message}; no facts from this episode")
        return []
    source = " ".join([m.content for m in messages] + [m.speaker for m in messages]).lower()
    anchor = messages[0].timestamp
    kept, dropped = [], []
    for fact in facts:
        (dropped if ungrounded(fact, source) else kept).append(fact)
    dated = [annotate_relative_times(f, anchor) for f in kept]
    if dropped or dated != kept:
        llm.log.repaired(DISTILLATION, f"dropped {len(dropped)} facts naming what the messages never say; dated {sum(a != b for a, b in zip(dated, kept))}")
    return dated
