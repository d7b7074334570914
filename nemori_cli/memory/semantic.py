"""Stages 5-6: semantic memory by prediction error.

For a new episode: evoke what memory already knows (facts above a cosine
threshold); if anything is evoked, predict the episode from its title and that
knowledge only; then keep as facts only what the raw messages hold that the
prediction missed or got wrong. With nothing evoked there is nothing to
predict from, so no prediction call is spent and everything new is distilled.

What was predicted and what it missed are kept per episode (``record``), so
`nemori inspect fact` can say why a fact exists.

Deterministic passes: relative times in facts get their absolute dates; a fact
naming a capitalised word found nowhere in the messages (an invented name or
place) is dropped and counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nemori_cli import stages
from nemori_cli.dates import annotate_relative_times
from nemori_cli.domain import Message
from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.prompts import distill as distill_prompt
from nemori_cli.prompts import predict as predict_prompt
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import predictions as prediction_sql
from nemori_cli.store.contract import Store

PREDICTION = stages.PREDICTION
DISTILLATION = stages.DISTILLATION

_CAPITALISED = re.compile(r"\b[A-Z][a-zA-Z]+\b")
_ALWAYS_OK = set(
    [
        "I",
        "The",
        "A",
        "An",
        "On",
        "In",
        "At",
        "By",
        "For",
        "To",
        "He",
        "She",
        "They",
        "We",
        "It",
        "His",
        "Her",
        "Their",
        "Our",
        "My",
        "This",
        "That",
        "These",
        "Those",
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ]
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


# How an episode's facts were distilled (the prediction record's method).
PREDICTED = "predicted"  # predicted from evoked facts; the facts are what the prediction missed
NOTHING_EVOKED = "nothing-evoked"  # nothing known was related: no prediction, everything new was kept
PREDICTION_FAILED = "prediction-failed"  # the prediction was unusable: distilled as if nothing were known
DIRECT = "direct"  # --distill direct: extracted from the raw episode, no prediction step at all


@dataclass(frozen=True)
class Distillation:
    """One episode's semantic step, whole: the facts, and why they exist (kept by ``record``)."""

    facts: list[str]  # what becomes facts: grounded, relative times dated
    method: str
    predicted: str | None = None  # the prediction the distillation was given
    evoked: tuple[str, ...] = ()  # the known facts it was predicted from
    missed: tuple[str, ...] | None = None  # what the distillation found the prediction missed; None: no usable answer
    dropped: tuple[str, ...] = ()  # of those, dropped for naming what the messages never say


def distill(
    db: Store,
    user: str,
    llm: StructuredLLM,
    title: str,
    messages: list[Message],
    episode_vector: np.ndarray,
    settings: SemanticSettings = SemanticSettings(),
    *,
    evoke=None,
) -> Distillation:
    """New facts for one episode (possibly none) and how they came to be, every outcome counted.

    ``evoke`` looks up what memory already knows (default: the facts table;
    --memory nemori+amem passes its notes' lookup).
    """
    evoke = evoke or fact_sql.evoke
    known = [] if settings.direct else evoke(db, user, episode_vector, k=settings.evoke_k, threshold=settings.threshold)
    method = DIRECT if settings.direct else PREDICTED if known else NOTHING_EVOKED
    prediction = None
    if known:
        try:
            prediction = llm.complete(
                predict_prompt.render(title, known), schema=predict_prompt.Prediction, stage=PREDICTION
            ).value.prediction
        except LLMOutputError as e:
            llm.log.fallback(PREDICTION, f"{e.message}; distilling without a prediction")
            method = PREDICTION_FAILED
    evoked = tuple(f.text for f in known)
    try:
        facts = llm.complete(
            distill_prompt.render(messages, prediction, direct=settings.direct), schema=distill_prompt.Distilled, stage=DISTILLATION
        ).value.facts
    except LLMOutputError as e:
        llm.log.fallback(DISTILLATION, f"{e.message}; no facts from this episode")
        return Distillation([], method, prediction, evoked)
    source = " ".join([m.content for m in messages] + [m.speaker for m in messages]).lower()
    anchor = messages[0].timestamp
    kept: list[str] = []
    dropped: list[str] = []
    for fact in facts:
        (dropped if ungrounded(fact, source) else kept).append(fact)
    dated = [annotate_relative_times(f, anchor) for f in kept]
    if dropped or dated != kept:
        llm.log.repaired(
            DISTILLATION,
            f"dropped {len(dropped)} facts naming what the messages never say; dated {sum(a != b for a, b in zip(dated, kept))}",
        )
    return Distillation(dated, method, prediction, evoked, tuple(facts), tuple(dropped))


def record(db: Store, user: str, episode_id: int, made: Distillation) -> None:
    """Keep why this episode's facts exist, in the unit of work that writes them (the caller's transaction)."""
    prediction_sql.record(
        db,
        user,
        episode_id,
        method=made.method,
        predicted=made.predicted,
        evoked=list(made.evoked),
        missed=None if made.missed is None else list(made.missed),
        dropped=list(made.dropped),
    )
