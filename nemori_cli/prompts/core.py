"""The answer prompt around a core context: the same opening for every question, the question's own part after it.

The opening (system message, then the user's current facts and the most
recent raw timeline) does not depend on the question, so a model server or
llama.cpp reads it once and keeps its KV cache; every question then costs
only what comes after it: older lines found for the question, worked-out
date arithmetic, today's date and the question. Nothing that varies by
question may go before the end of the core, or the cache is lost.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from nemori_cli.dates import annotate_relative_times, format_date
from nemori_cli.domain import Hit
from nemori_cli.prompts import timeline
from nemori_cli.prompts.answer import NOT_MENTIONED, today_text
from nemori_cli.prompts.render import clip

FACT_LIMIT = 300  # characters of one fact

SYSTEM = (
    "You answer questions about a person's conversations using only the memory below: the facts known now, "
    "then the conversation itself, oldest first, each day headed by its date, then older lines found for the "
    "question. Quoted lines are what was said; a date in [brackets] is what a word like 'yesterday' meant, and "
    "when you are asked when something happened, that is the date to give, not the day it was said. Reply in a "
    'few words, in the third person, as a person would, never by copying a line: for example "a red bike", '
    '"7 May 2023", "in Lisbon, with her sister", "3 years", "Sam accepted the offer". Give dates as '
    "absolute dates. When two memories disagree, the later one is true now. If the memory does not say, answer: "
    f"{NOT_MENTIONED} Answer with JSON only."
)

# Between the core and a question's own part. The core ends with a newline and
# this starts with a letter, so the tokens of the core are the same whether or
# not a question follows (no token is merged across the boundary).
TAIL_HEADING = "Older lines found for this question:\n"


def fact_lines(facts: list[Hit]) -> list[str]:
    return [f"- ({format_date(h.start.date())}) {clip(h.text, FACT_LIMIT)}" for h in facts]


def message_block(messages: list[Hit]) -> str:
    """The raw turns on the dated timeline, as every answer prompt shows them (prompts/timeline.py)."""
    return timeline.render(messages)


def render_core(facts: list[Hit], messages: list[Hit], *, complete: bool) -> str:
    """The question-independent part of the user's message; ends with a newline."""
    parts = []
    if facts:
        parts.append("Facts known now:\n" + "\n".join(fact_lines(facts)))
    if messages:
        heading = "The whole conversation, oldest first:" if complete else "The most recent part of the conversation, oldest first:"
        parts.append(heading + "\n" + message_block(messages))
    else:
        parts.append("(no conversation stored)")
    return "\n".join(parts) + "\n"


def prefix(core_text: str) -> list[dict[str, str]]:
    """The messages whose KV state is kept: the system message, and the user's message as far as the core's end."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": core_text}]


FOCUS_HEADING = "Lines that best match the question:\n"
# Words of a best-matching line shown again when it is cut (CoreBudget.focus_words): the stretch that
# holds most of the question's words. Every token after the core is read anew for each question, and
# the whole line is in the core above it; docs/CORE.md measures what the cut saves and costs.
FOCUS_WORDS = 12
STEM = 5  # letters two words must share to count as the same ("decided" and "decide")
_WORDISH = re.compile(r"[a-z0-9']+")
_ANNOTATION = re.compile(r"\[[^\]]*\]")


def around(text: str, wanted: frozenset[str], width: int = FOCUS_WORDS) -> str:
    """The ``width`` words of ``text`` holding most words that share a stem with ``wanted`` (and any [date] a relative word got), marked "…" where cut."""
    # A [7 May 2023] annotation is one word here, so a cut never splits it (NUL is no whitespace to split(); \xa0 is).
    words = _ANNOTATION.sub(lambda m: m.group(0).replace(" ", "\x00"), text).split()
    if len(words) <= width:
        return text

    def matches(word: str) -> bool:
        return word.startswith("[") or any(w[:STEM] in wanted for w in _WORDISH.findall(word.lower()))

    hits = [i for i, w in enumerate(words) if matches(w)]
    starts = {min(max(0, i - width // 4), len(words) - width) for i in hits} or {0}
    start = min(starts, key=lambda s: (-sum(s <= i < s + width for i in hits), s))
    shown = " ".join(words[start : start + width]).replace("\x00", " ")
    return ("… " if start else "") + shown + (" …" if start + width < len(words) else "")


def focus_lines(turns: list[Hit], wanted: frozenset[str] | None = None, width: int = FOCUS_WORDS) -> str:
    """The best-matching turns again, each with its date: a small model answers from what it read last.

    With ``wanted`` (the question's word stems), each line is cut to the
    ``width`` words around them; without, it is shown whole.
    """
    lines = []
    for hit in turns:
        for m in hit.messages[:1]:
            text = clip(annotate_relative_times(m.content, m.timestamp), timeline.MESSAGE_LIMIT)
            if wanted is not None and width:
                text = around(text, wanted, width)
            lines.append(f'- {format_date(m.timestamp.date())}, {m.speaker}: "{text}"')
    return "\n".join(lines)


def render(
    core_text: str,
    question: str,
    tail: list[Hit],
    *,
    now: str | None,
    arithmetic: list[str],
    focus: Sequence[Hit] = (),
    wanted: frozenset[str] | None = None,
    focus_words: int = 0,
) -> list[dict[str, str]]:
    """The whole prompt: the core, then what only this question needs."""
    parts = []
    if tail:
        parts.append(TAIL_HEADING + timeline.render(tail))
    if focus:
        parts.append(FOCUS_HEADING + focus_lines(list(focus), wanted, focus_words))
    if arithmetic:
        parts.append("Date arithmetic, already worked out:\n" + "\n".join(arithmetic))
    if now:
        parts.append(f"Today is {today_text(now)}.")
    parts.append(f"Question: {question}")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": core_text + "\n".join(parts)}]
