"""The answer context for a small model: every retrieved memory on one dated timeline.

A 0.5B model reads a list of blocks grouped by kind (episodes, then facts)
as separate stories and follows whichever it read last. Here each memory
becomes one or more lines under the day it happened, oldest first: a fact,
an episode's narrative, a raw turn quoted exactly (relative times resolved
beside it). The date is written once per day, so lines stay short, and the
model reads the order of events off the page instead of working it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime

from nemori_cli.dates import annotate_relative_times, format_date
from nemori_cli.domain import Hit, to_epoch
from nemori_cli.prompts.render import clip

NARRATIVE_LIMIT = 700  # characters of an episode's narrative
FACT_LIMIT = 300
MESSAGE_LIMIT = 600  # a raw turn is quoted whole up to this many characters


@dataclass(frozen=True)
class Line:
    at: datetime
    order: int  # within one instant: episode, fact, note, then messages
    key: str  # what makes two lines the same ("m:12" for message 12): shown once
    text: str
    episode: int | None = None  # a raw turn's episode, once the build has made it (for render's ``heads``)


def lines_of(hit: Hit) -> list[Line]:
    """The timeline lines one retrieved memory contributes."""
    if hit.kind == "episode":
        return [Line(hit.start, 0, f"e:{hit.id}", f"(episode) {hit.title}: {clip(hit.text, NARRATIVE_LIMIT)}")]
    if hit.kind == "fact":
        return [Line(hit.start, 1, f"f:{hit.id}", f"(fact) {clip(hit.text, FACT_LIMIT)}")]
    if hit.kind == "note":
        extra = f" [{clip(hit.context, 160)}]" if hit.context else ""
        return [Line(hit.start, 2, f"n:{hit.id}", f"(note) {clip(hit.text, FACT_LIMIT)}{extra}")]
    if hit.kind == "message":
        return [
            Line(
                m.timestamp,
                3,
                f"m:{m.id}",
                f'{m.speaker}: "{clip(annotate_relative_times(m.content, m.timestamp), MESSAGE_LIMIT)}"',
                m.episode_id,
            )
            for m in hit.messages
        ]
    return []  # the running summary is not a dated event; render() adds it whole


def estimate_tokens(text: str) -> int:
    """About four characters a token for English with these models' tokenizers.

    An estimate on purpose: retrieval runs without a model (nemori search), and
    the budget only has to be steady, not exact; the bench records the true count.
    """
    return len(text) // 4 + 1


ORDERS = ("time", "best-last")  # SearchOptions.timeline_order
# How the reader is asked (SearchOptions.answer_form; the instructions are prompts/answer.py's): "answer", the answer
# alone (shipped); "quote", the words that answer copied first, then the answer; "question-first", the question
# before the memories as well as after them.
ANSWER_FORMS = ("answer", "quote", "question-first")


HEAD_LIMIT = 80  # characters of an episode's title in a heading


def heading(day: date, title: str | None) -> str:
    """A day's heading; with ``title``, the episode its turns below belong to ("8 May 2023 (episode: A new job):")."""
    return f"{format_date(day)} (episode: {clip(title, HEAD_LIMIT)}):" if title else f"{format_date(day)}:"


def render(hits: list[Hit], order: str = "time", heads: Mapping[int, str] | None = None) -> str:
    """The timeline, oldest first, each day headed by its date; a line retrieved twice is shown once.

    ``heads`` (episode id: title) names, in the heading, the episode the raw turns below it belong to: the build's
    dated title over the exact lines, where the turns of one day come from two episodes a heading each. Without it
    (or for a turn not yet in an episode) the heading is the date alone.

    ``order="best-last"``: one block a retrieved memory, in the order of ``hits`` (best first) reversed, so the
    best-ranked is read last, next to the question; each block's lines oldest first under their dates. A line two
    memories share is shown once, in the better-ranked one's block.
    """
    if order not in ORDERS:
        raise ValueError(f"timeline order {order!r}: expected one of {', '.join(ORDERS)}")
    unique: dict[str, Line] = {}
    blocks: list[list[Line]] = []
    for hit in hits:
        block = []
        for line in lines_of(hit):
            if line.key not in unique:
                unique[line.key] = line
                block.append(line)
        if block:
            blocks.append(block)
    if order == "time":
        blocks = [list(unique.values())]
    else:
        blocks.reverse()
    out: list[str] = []
    for block in blocks:
        last_head = None  # each block names its day again: the block before may end on another
        for line in sorted(block, key=lambda line: (to_epoch(line.at), line.order, line.key)):  # instants: offsets may differ
            day = line.at.date()
            title = heads.get(line.episode) if heads and line.episode is not None else None
            if (day, title) != last_head:
                out.append(heading(day, title))
                last_head = (day, title)
            out.append(f"- {line.text}")
    summaries = [h for h in hits if h.kind == "summary"]
    for h in summaries:
        out.append(f"Summary of everything so far: {clip(h.text, 2400)}")
    return "\n".join(out)


def days_shown(hits: list[Hit]) -> list:
    """The distinct days on the timeline, in order (for the date arithmetic)."""
    return sorted({line.at.date() for hit in hits for line in lines_of(hit)})
