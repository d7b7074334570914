"""Stage 3: a group of messages becomes an episode draft (title, narrative, times).

The model writes; deterministic passes make the result trustworthy:
relative times in the messages are annotated with their dates before the model
sees them, and any relative time left in the narrative is annotated after;
a narrative that loops on one sentence is cut to its distinct sentences; a
narrative with no absolute date gets the episode's date in front. When the
model gives nothing usable, the episode is built from the messages themselves
(a counted fallback), so no message is ever left without an episode.
"""

from __future__ import annotations

import re
from datetime import datetime

from nemori_cli import stages
from nemori_cli.dates import annotate_relative_times, format_date
from nemori_cli.domain import Message
from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import Completion, StructuredLLM
from nemori_cli.pipeline.partition import Group
from nemori_cli.prompts import narrative as prompt
from nemori_cli.prompts.render import clip
from nemori_cli.store.episodes import EpisodeDraft

STAGE = stages.NARRATION
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_YEAR = re.compile(r"\b(19|20)\d\d\b")


def narrate(group: Group, llm: StructuredLLM) -> EpisodeDraft:
    try:
        answer: Completion | LLMOutputError = llm.complete(prompt.render(list(group.messages)), schema=prompt.Narrative, stage=STAGE)
    except LLMOutputError as e:
        answer = e
    return _draft(group, answer, llm)


def narrate_many(groups: list[Group], llm: StructuredLLM) -> list[EpisodeDraft]:
    """Every group's draft, the model's first attempts asked together (a batched decoder, or requests in flight at once)."""
    answers = llm.complete_many([prompt.render(list(g.messages)) for g in groups], schema=prompt.Narrative, stage=STAGE)
    return [_draft(g, a, llm) for g, a in zip(groups, answers)]


def _draft(group: Group, answer: Completion | LLMOutputError, llm: StructuredLLM) -> EpisodeDraft:
    """The episode draft from the model's answer, repaired, or from the messages when there is none (a counted fallback)."""
    messages = list(group.messages)
    if isinstance(answer, LLMOutputError):
        llm.log.fallback(STAGE, f"{answer.message}; narrative built from the messages")
        title, narrative = fallback_narrative(messages)
    else:
        title, narrative = answer.value.title.strip(), answer.value.narrative.strip()
        title, narrative = repair_narrative(title, narrative, messages[0].timestamp, clip(messages[0].content, 60), llm)
    return EpisodeDraft(
        title=title,
        narrative=narrative,
        start=messages[0].timestamp,
        end=messages[-1].timestamp,
        boundary=group.boundary,
        message_ids=tuple(m.id for m in messages),
    )


def repair_narrative(
    title: str, narrative: str, anchor: datetime, fallback_title: str, llm: StructuredLLM, stage: stages.Stage = STAGE
) -> tuple[str, str]:
    """Deterministic fixes of a model's episode text, each counted under ``stage``."""
    fixes = []
    sentences = _SENTENCE.split(narrative)
    distinct = list(dict.fromkeys(s.strip() for s in sentences if s.strip()))
    if len(distinct) < len(sentences):
        fixes.append(f"dropped {len(sentences) - len(distinct)} repeated sentences")
        narrative = " ".join(distinct)
    annotated = annotate_relative_times(narrative, anchor)
    if annotated != narrative:
        fixes.append("annotated relative times")
        narrative = annotated
    if not _YEAR.search(narrative):
        fixes.append("added the episode date")
        narrative = f"On {format_date(anchor.date())}: {narrative}"
    if not title:
        title = fallback_title
        fixes.append("title from first message")
    if fixes:
        llm.log.repaired(stage, "; ".join(fixes))
    return title, narrative


def fallback_narrative(messages: list[Message]) -> tuple[str, str]:
    """An honest, searchable episode without a model: who said what, when."""
    day = format_date(messages[0].timestamp.date())
    people = " and ".join(dict.fromkeys(m.speaker for m in messages))
    title = clip(f"{people}: {messages[0].content}", 80)
    said = " ".join(f'{m.speaker} said: "{clip(annotate_relative_times(m.content, m.timestamp), 200)}"' for m in messages)
    return title, clip(f"On {day}, {people} talked. {said}", prompt.NARRATIVE_MAX * 2)
