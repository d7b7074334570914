"""Answering a question from retrieved memories, with their dates for relative time."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field, create_model, field_validator

from nemori_cli.dates import find_relative_times, format_date, spell_iso_dates
from nemori_cli.domain import Hit
from nemori_cli.prompts import timeline
from nemori_cli.prompts.render import clip, message_lines
from nemori_cli.prompts.timeline import ANSWER_FORMS

ANSWER_MAX = 400
TIMELINE_ANSWER_MAX = 160  # characters: a short phrase, with room for a list of names or dates

SYSTEM = (
    "You answer questions about a person's past conversations using only the memories "
    "given. Each memory has an id and the date it happened. When a memory says "
    "'yesterday' or 'last week', work out the date from the memory's own date. Give "
    "dates as absolute dates. Be brief: a short phrase, not a paragraph. If the memories "
    "do not contain the answer, say that you do not know. Answer with JSON only."
)


# The one phrase an abstention is given in: LoCoMo's official scorer and the
# bench's abstention check both look for "not mentioned".
NOT_MENTIONED = "Not mentioned in my memories."

TIMELINE_SYSTEM = (
    "You answer questions about a person's past conversations using only the memories "
    "given, which are listed by date, oldest first. Quoted lines are what was said; a date "
    "in [brackets] is what a word like 'yesterday' meant. Reply in a few words, as a person "
    'would, never by copying a whole line: for example "a red bike", "7 May 2023", '
    '"in Lisbon, with her sister", "3 years". Give dates as absolute dates. When two '
    "memories disagree, the later one is true now. If the memories do not say, answer: "
    f"{NOT_MENTIONED} Answer with JSON only."
)


_CLOCK = re.compile(r"^\s*(?:at\s+)?\d{1,2}[:.]\d{2}(?:\s*[ap]\.?m\.?)?\s*$", re.IGNORECASE)


def is_clock_time(answer: str) -> bool:
    """'13:56', '1.56 pm': a time of day, never an answer to 'how long'."""
    return bool(_CLOCK.match(answer))


def _no_clock(cls, v: str) -> str:
    if is_clock_time(v):
        raise ValueError("a time of day is not an answer to 'how long'; give a duration or a date")
    return v


_BRACKETED = re.compile(r"\s?\[([^\[\]]{1,60})\]")


def tidy(answer: str) -> str:
    """An answer that copied a resolved time keeps the date only: "yesterday [3 March 2024]" -> "3 March 2024".

    Its ISO dates are written as the prompt writes dates ("2023-10" -> "October 2023": dates.spell_iso_dates).

    The brackets are how the context marks what a relative word meant; in an
    answer they are noise (and cost set-F1 precision on the bench).
    """
    from datetime import date

    out, pos = [], 0
    for mention in find_relative_times(answer, date(2000, 1, 1)):  # any anchor: only the spans are used
        m = _BRACKETED.match(answer, mention.end)
        if m is None or mention.start < pos:
            continue
        out += [answer[pos : mention.start], m.group(1)]
        pos = m.end()
    out.append(answer[pos:])
    text = _BRACKETED.sub(lambda m: " " + m.group(1), "".join(out)).strip()
    # The "…" that marks where a line shown again was cut (prompts/core.around) is not part of an answer.
    text = text.strip("… ").strip() or text
    return _first_sentence(spell_iso_dates(text))


_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]])(?<!\bDr)(?<!\bMr)(?<!\bMrs)(?<!\bMs)(?<!\bSt)[.!?](?=\s+[A-Z])")


def _first_sentence(text: str) -> str:
    """An answer that goes on past its first sentence keeps the first: the rest is a copied line's tail.

    Asked for a few words, a 0.5B model often copies a whole chat line ("It
    was really rewarding. Really made me think about..."); the first sentence
    is what answers. "Dr. Smith" or "2.5 km" do not end a sentence here.
    """
    m = _SENTENCE_END.search(text)
    if m is None or len(text[: m.start()].split()) < 2:
        return text
    return text[: m.start()]


class AnswerText(BaseModel):
    """What every answer model holds, for the type checker; timeline_schema and schema_for add the bounds."""

    answer: str


class QuotedAnswer(BaseModel):
    """The quote form's answer (SearchOptions.answer_form): the copied words first, so the model writes them first.

    Not an AnswerText subclass: pydantic puts a base class's fields first, and the order is the point.
    """

    quote: str
    answer: str


class CitedAnswer(AnswerText):
    sources: list[int]


@lru_cache(maxsize=8)
def timeline_schema(duration: bool, form: str = "answer") -> type[AnswerText]:
    """Only the answer: citations come from what was retrieved, not from the model (fewer tokens to write).

    With ``form="quote"`` the model first copies the words that answer, then answers (the answer is what is kept).
    """
    # Clipped, not refused: llama.cpp's grammar does not bound a string this long, and a
    # long answer is still an answer (its first sentence is kept, see tidy()).
    validators = {"clip_answer": field_validator("answer")(lambda cls, v: clip(v, TIMELINE_ANSWER_MAX))}
    if duration:
        validators["no_clock"] = field_validator("answer")(_no_clock)
    answer = (str, Field(min_length=1, description="The short answer."))
    if form == "quote":
        validators["clip_quote"] = field_validator("quote")(lambda cls, v: clip(v, QUOTE_MAX))
        quote = (str, Field(description="The words of the memories that answer, copied."))
        quoted = create_model("Answer", __base__=QuotedAnswer, __validators__=validators, quote=quote, answer=answer)
        return quoted  # type: ignore[return-value]  # it has .answer, all a caller reads
    return create_model("Answer", __base__=AnswerText, __validators__=validators, answer=answer)


def today_text(now: str) -> str:
    """'2023/04/01 (Sat) 05:39' -> '1 April 2023': the day only (a clock time invites clock-time answers)."""
    from dateutil import parser as date_parser

    try:
        return format_date(date_parser.parse(re.sub(r"\([A-Za-z]{3}\)", " ", now), fuzzy=True).date())
    except (ValueError, OverflowError):
        return now


MEMORIES_HEADING = "Memories:\n"


# The same instructions for a timeline in blocks, the best-ranked last (SearchOptions.timeline_order = "best-last"):
# "oldest first" would be untrue of it.
BEST_LAST_SYSTEM = TIMELINE_SYSTEM.replace(
    "which are listed by date, oldest first.", "in blocks under their dates, the most relevant block last."
)


# The reader's forms (timeline.ANSWER_FORMS), tenth round (docs/BEYOND.md). "quote": a 0.5B reader that had the
# evidence answered from another line; copying the words that answer first puts the right line just before its
# answer. "question-first": the reader reads the memories knowing what it looks for.
QUOTE_MAX = 300  # characters of the copied words kept (never shown: only the answer is)

QUOTE_SYSTEM = TIMELINE_SYSTEM.replace(
    "Reply in a few words, as a person would, never by copying a whole line:",
    "First copy the words of the memories that answer the question, then give the answer in a few words, as a "
    "person would, never a whole line:",
).replace(f"answer: {NOT_MENTIONED}", f"copy nothing and answer: {NOT_MENTIONED}")
QUESTION_HEADING = "Question:"


def timeline_head(order: str = "time", form: str = "answer") -> list[dict[str, str]]:
    """How every timeline prompt begins (the instructions, then the heading): the part a saved KV state can hold."""
    if form not in ANSWER_FORMS:
        raise ValueError(f"answer form {form!r} is not one of {', '.join(ANSWER_FORMS)}")
    if order != "time" and form != "answer":
        # Each other form was written for, and measured with, the one timeline oldest first: best-last's
        # instructions would drop the quote's, and its blocks would follow a "Question:" heading.
        raise ValueError(f"answer form {form!r} is made for timeline order 'time', not {order!r}")
    system = BEST_LAST_SYSTEM if order == "best-last" else QUOTE_SYSTEM if form == "quote" else TIMELINE_SYSTEM
    heading = QUESTION_HEADING if form == "question-first" else MEMORIES_HEADING
    return [{"role": "system", "content": system}, {"role": "user", "content": heading}]


def head_slot(order: str = "time", form: str = "answer") -> str:
    """The file a timeline head's saved state lives in: one per order and form, so no two overwrite each other's."""
    return "-".join([*([order] if order != "time" else []), *([form] if form != "answer" else []), "head"])


def render_timeline(
    question: str,
    hits: list[Hit],
    *,
    now: str | None,
    arithmetic: list[str],
    order: str = "time",
    form: str = "answer",
    heads: Mapping[int, str] | None = None,
) -> list[dict[str, str]]:
    """The timeline prompt; ``heads`` (episode id: title) names each raw turn's episode in its day's heading."""
    memories = timeline.render(hits, order=order, heads=heads) if hits else "(no memories found)"
    worked = ("\nDate arithmetic, already worked out:\n" + "\n".join(arithmetic)) if arithmetic else ""
    today = f"\nToday is {today_text(now)}." if now else ""
    system, user = timeline_head(order, form)
    opening = f"{QUESTION_HEADING} {question}\n{MEMORIES_HEADING}" if form == "question-first" else user["content"]
    return [system, {"role": "user", "content": f"{opening}{memories}\n{worked}{today}\nQuestion: {question}"}]


@lru_cache(maxsize=64)
def schema_for(ids: tuple[int, ...]) -> type[CitedAnswer]:
    source = Literal[ids] if ids else int
    return create_model(
        "Answer",
        __base__=CitedAnswer,
        __validators__={"clip_answer": field_validator("answer")(lambda cls, v: clip(v, ANSWER_MAX))},
        answer=(str, Field(min_length=1, description="The short answer.")),
        sources=(
            list[source],  # type: ignore[valid-type]  # a Literal made at run time: no static type says it
            Field(default_factory=list, max_length=3, description="Ids of the memories the answer comes from."),
        ),
    )


def day(hit: Hit) -> str:
    """The date a memory is from, without the time of day (see message_lines)."""
    return format_date(hit.start.date())


def render_memories(hits: list[Hit], raw_for_top: int, context: str = "narrative", message_limit: int = 200) -> str:
    """Episodes with ids (citable), then facts with the date they were said, A-MEM notes with their context, then the running summary.

    With ``context="messages"`` every episode shows its raw messages instead of
    its narrative, each clipped at ``message_limit`` characters (the benchmark's
    raw-text baselines raise it so that their context is not cut short).
    """
    episodes = [h for h in hits if h.kind == "episode"]
    facts = [h for h in hits if h.kind == "fact"]
    summaries = [h for h in hits if h.kind == "summary"]
    notes = [h for h in hits if h.kind == "note"]
    blocks = []
    for rank, hit in enumerate(episodes):
        if context == "messages" and hit.messages:
            lines = message_lines(hit.messages, numbered=False, limit=message_limit, clock=False).splitlines()
            blocks.append(f"[{hit.id}] ({day(hit)}) {hit.title}:\n" + "\n".join("  " + line for line in lines))
            continue
        block = f"[{hit.id}] ({day(hit)}) {hit.title}: {clip(hit.text, 900)}"
        if rank < raw_for_top and hit.messages:
            raw = message_lines(hit.messages, numbered=False, limit=200, clock=False).splitlines()
            block += "\n  Messages:\n" + "\n".join("  " + line for line in raw)
        blocks.append(block)
    if facts:
        blocks.append("Facts:")
        blocks.extend(f"- ({day(h)}) {clip(h.text, 300)}" for h in facts)
    if notes:
        blocks.append("Notes:")
        blocks.extend(f"- ({day(h)}) {clip(h.text, 300)}" + (f" [{clip(h.context, 160)}]" if h.context else "") for h in notes)
    for h in summaries:
        blocks.append(f"Summary of everything so far:\n{clip(h.text, 2400)}")
    return "\n".join(blocks)


def render(
    question: str, hits: list[Hit], *, raw_for_top: int, now: str | None = None, context: str = "narrative", message_limit: int = 200
) -> list[dict[str, str]]:
    memories = render_memories(hits, raw_for_top, context, message_limit) if hits else "(no memories found)"
    today = f"\nToday is {now}." if now else ""
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Memories:\n{memories}\n{today}\nQuestion: {question}"},
    ]
