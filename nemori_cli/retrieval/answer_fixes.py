"""What code corrects in a small model's answer after it is written: a copied chat line, and a "when" that names the wrong day.

A 0.5B model asked "What did Sam decide about the job offer?" answers by
copying Sam's line, "Quick update: I decided to accept the Northwind offer",
and asked "When did Priya go to the gym?" gives the day the line was said,
although the line says "yesterday". Both are cheap to see in code and cheap to
mend without a second model call:

- a copied line (``copied_line``) is said again in the third person, the
  speaker's name for "I" (``third_person``);
- a "when" answer that is exactly the day the best-matching turn was said,
  where that turn speaks of another day ("yesterday", "last week"), gets
  the day it speaks of (``event_day``).
"""

from __future__ import annotations

import re
from datetime import date
from typing import Protocol, TypeVar

from nemori_cli.dates import find_relative_times, format_date
from nemori_cli.domain import Hit, Message
from nemori_cli.retrieval.timecalc import asks_when

COPY_MIN_WORDS = 6  # fewer words in a row than this is a phrase taken from a line, not a line copied

_WORDS = re.compile(r"[\w']+")


class _Said(Protocol):
    """A stored Message, or a message as read from an input (the bench checks its questions' own conversation)."""

    @property
    def content(self) -> str: ...


_SaidT = TypeVar("_SaidT", bound=_Said)


def _words(text: str) -> list[str]:
    return [w.lower().strip("'") for w in _WORDS.findall(text)]


def copied_line(answer: str, messages: list[_SaidT]) -> _SaidT | None:
    """The message the answer copies: at least COPY_MIN_WORDS of its words, in a row, are the whole answer."""
    said = _words(answer)
    if len(said) < COPY_MIN_WORDS:
        return None
    needle = " " + " ".join(said) + " "
    for m in messages:
        if needle in " " + " ".join(_words(m.content)) + " ":
            return m
    return None


# First-person words and what they become with the speaker's name; longest first.
_FIRST_PERSON = (
    (re.compile(r"\bI'm\b|\bI am\b", re.IGNORECASE), "{name} is"),
    (re.compile(r"\bI've\b|\bI have\b", re.IGNORECASE), "{name} has"),
    (re.compile(r"\bI'd\b", re.IGNORECASE), "{name} would"),
    (re.compile(r"\bI'll\b|\bI will\b", re.IGNORECASE), "{name} will"),
    (re.compile(r"\bI was\b"), "{name} was"),
    (re.compile(r"\bmyself\b", re.IGNORECASE), "{name}"),
    (re.compile(r"\bmy\b", re.IGNORECASE), "{name}'s"),
    (re.compile(r"\bmine\b", re.IGNORECASE), "{name}'s"),
    (re.compile(r"\bI\b"), "{name}"),
    (re.compile(r"\bme\b"), "{name}"),
)
# A lead-in before the content: "Quick update:", "Guess what -", "So,", "Yeah!", a name called ("Mel, I ...").
_LEAD_IN = re.compile(
    r"^\s*(?:(?:[\w']+\s+){0,3}[\w']+\s*[:\u2013\u2014-]\s+|(?:so|well|yeah|yes|oh|hey|wow|ok|okay|guess what)\b[,!.]?\s+"
    r"|[A-Z][\w']*,\s+(?=I\b|my\b|I'))",
)


def first_person(text: str) -> bool:
    return any(p.search(text) for p, _ in _FIRST_PERSON)


def third_person(answer: str, speaker: str) -> str:
    """A first-person line said of its speaker: "Quick update: I decided to accept it!" -> "Sam decided to accept it"."""
    name = speaker.strip() or "they"
    text = _LEAD_IN.sub("", answer, count=1).strip() or answer.strip()
    for pattern, replacement in _FIRST_PERSON:
        text = pattern.sub(replacement.format(name=name), text)
    text = text.rstrip(" !.") if text.endswith("!") else text
    return text[:1].upper() + text[1:] if text else answer


def uncopied(answer: str, messages: list[Message]) -> str:
    """The answer, or, when it copies a first-person line, that line said of its speaker."""
    line = copied_line(answer, messages)
    if line is None or not first_person(answer):
        return answer
    return third_person(answer, line.speaker)


EVENT_TURNS = 3  # how far down the best-matching turns a "when" answer's day is looked for


def event_day(answer: str, question: str, ranked: list[Hit]) -> str:
    """A "when" answer that names the day a line was said, where the line speaks of another day, names that day.

    The line is the best-matching turn said on the day the answer names,
    among the first EVENT_TURNS of ``ranked`` (best first).
    """
    if not asks_when(question):
        return answer
    for hit in ranked[:EVENT_TURNS]:
        turn = next((m for m in hit.messages if m.id == hit.id), None)
        if turn is None:
            continue
        said = format_date(turn.timestamp.date())
        if said not in answer:
            continue
        mentions = find_relative_times(turn.content, turn.timestamp)
        if mentions and mentions[0].resolved != said:
            return answer.replace(said, mentions[0].resolved, 1)
        return answer  # the best line said that day speaks of no other day
    return answer


def resolved_phrase(answer: str, question: str, ranked: list[Hit]) -> str:
    """A "when" answer that repeats a line's relative words ("last Saturday") gets the date they meant in that line.

    The line is the best-matching turn that says those words (``ranked``,
    best first); no such line, and the answer stays as it is.
    """
    if not asks_when(question):
        return answer
    found = find_relative_times(answer, date(2000, 1, 1))  # any anchor: only the words are used here
    if not found:
        return answer
    said = found[0]
    phrase = said.text.lower()
    for hit in ranked:
        for turn in hit.messages:
            if phrase not in turn.content.lower():
                continue
            for mention in find_relative_times(turn.content, turn.timestamp):
                if mention.text.lower() == phrase:
                    return answer[: said.start] + mention.resolved + answer[said.end :]
    return answer
