"""Date arithmetic worked out by code, for the questions that need it.

A 0.5B model cannot subtract two dates, and one shown a clock time answers
"how long" with it. So for "how long", "how many days", "how long ago",
"since when" and "which came first" questions, the answer prompt gets the
spans between the days on the timeline (and from each to today, when today
is known), computed here from the stored absolute dates.
"""

from __future__ import annotations

import re
from datetime import date, datetime

from dateutil import parser as date_parser

from nemori_cli.dates import find_relative_times, format_date
from nemori_cli.domain import Hit

# "how long" of any kind: the answer is a duration or a date, never a time of day.
_DURATION = re.compile(
    r"\bhow\s+(?:long|many\s+(?:days?|weeks?|months?|years?))\b|\bhow\s+old\b|\bago\b|\bsince\s+when\b",
    re.IGNORECASE,
)
# A span between two events: the days shown are subtracted pairwise. Not
# "how long has she had her friends": that span is said in the chat ("for 4
# years"), and dates of the conversation itself would only mislead.
_BETWEEN = re.compile(
    r"\bbetween\b.+\band\b|\bhow\s+many\s+(?:days?|weeks?|months?|years?)\s+(?:passed|elapsed|apart|before|after|later|earlier)\b"
    r"|\bhow\s+long\s+(?:before|after)\b",
    re.IGNORECASE,
)
# A span to the day the question is asked.
_TO_TODAY = re.compile(r"\bago\b|\bsince\b|\bhow\s+many\s+(?:days?|weeks?|months?|years?)\s+(?:have|has)\s+passed\b", re.IGNORECASE)
_ORDER = re.compile(
    r"\b(?:first|earlier|later|sooner|most recent(?:ly)?)\b.*\bor\b|\bwhich\b.*\b(?:first|earlier|later|most recent(?:ly)?)\b",
    re.IGNORECASE,
)
MAX_DAYS = 6  # spans listed for at most this many days: beyond, the lines cost more than they help


def asks_duration(question: str) -> bool:
    return bool(_DURATION.search(question))


_WHEN = re.compile(r"^\s*(?:when|on what (?:date|day)|what (?:date|day|year|month))\b", re.IGNORECASE)


def asks_when(question: str) -> bool:
    return bool(_WHEN.match(question))


def asks_order(question: str) -> bool:
    return bool(_ORDER.search(question))


def parse_day(text: str | None) -> date | None:
    """The day a free-form date means ('30 May 2023 23:40', '2023/05/30 (Tue)'); None if it is none."""
    if not text:
        return None
    try:
        return date_parser.parse(re.sub(r"\([A-Za-z]{3}\)", " ", text), fuzzy=True).date()
    except (ValueError, OverflowError):
        return None


def span(a: date, b: date) -> str:
    """'18 days (about 3 weeks)', in the units people ask in."""
    days = abs((b - a).days)
    parts = [f"{days} day{'s' if days != 1 else ''}"]
    if days >= 14:
        parts.append(f"about {round(days / 7)} weeks")
    if days >= 60:
        parts.append(f"about {round(days / 30.44)} months")
    if days >= 365:
        parts.append(f"about {days / 365.25:.1f} years")
    return parts[0] + (f" ({', '.join(parts[1:])})" if len(parts) > 1 else "")


def notes(question: str, days: list[date], today: date | None) -> list[str]:
    """Lines of date arithmetic for this question, or none when it asks for none."""
    shown = days[:MAX_DAYS]
    lines = []
    if asks_order(question) and len(shown) > 1:
        lines.append("In order: " + ", then ".join(format_date(d) for d in shown) + ".")
    if _BETWEEN.search(question):
        lines.extend(f"From {format_date(a)} to {format_date(b)}: {span(a, b)}." for a, b in zip(shown, shown[1:]))
    if today is not None and _TO_TODAY.search(question):
        lines.extend(f"From {format_date(d)} to today ({format_date(today)}): {span(d, today)}." for d in shown if d <= today)
    return lines


def when_hint(question: str, hits: list[Hit]) -> list[str]:
    """For a "when" question: the date of the best-ranked raw turn, and what its relative words mean.

    A 0.5B model shown "8 May 2023:" above "I painted that lake sunrise last
    year [2022]" answers 8 May 2023; said in words, the resolved date is
    hard to miss. ``hits`` are best first (retrieval/budget.py).
    """
    if not asks_when(question):
        return []
    for hit in hits:
        if hit.kind != "message":
            continue
        turn = next((m for m in hit.messages if m.id == hit.id), None)
        if turn is None:
            continue
        said = f"The line that best matches the question ({turn.speaker}) was said on {format_date(turn.timestamp.date())}"
        mentions = find_relative_times(turn.content, turn.timestamp)
        if mentions:
            meant = "; ".join(f'"{m.text}" there means {m.resolved}' for m in mentions[:2])
            return [f"{said}; {meant}."]
        return [f"{said}."]
    return []


# "between A and B", "how many days before A did I B", "how long after A did B".
_TWO_EVENTS = (
    re.compile(r"\bbetween\s+(?P<a>.+?)\s+and\s+(?P<b>.+?)[?.!]*$", re.IGNORECASE),
    re.compile(
        r"\bhow\s+(?:many\s+\w+|long)\s+(?:before|after)\s+(?P<a>.+?)\s+(?:did|do|was|were|had|have)\s+(?:i|we|you|he|she|they|\w+)\s+(?P<b>.+?)[?.!]*$",
        re.IGNORECASE,
    ),
)
_CONTENT = re.compile(r"[a-z0-9']{3,}")
_COMMON = frozenset(
    [
        "the",
        "and",
        "did",
        "does",
        "had",
        "has",
        "have",
        "was",
        "were",
        "with",
        "for",
        "from",
        "that",
        "this",
        "what",
        "when",
        "where",
        "which",
        "who",
        "how",
        "many",
        "much",
        "long",
        "days",
        "weeks",
        "months",
        "years",
        "day",
        "week",
        "month",
        "year",
        "passed",
        "ago",
        "before",
        "after",
        "since",
        "between",
        "my",
        "our",
        "your",
        "their",
        "his",
        "her",
        "its",
        "i'm",
        "attend",
        "attended",
        "went",
        "go",
        "going",
    ]
)


def _words(text: str) -> set[str]:
    return {w.strip("'") for w in _CONTENT.findall(text.lower())} - _COMMON


_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_EXPLICIT = re.compile(
    rf"\b(?:{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?)\b",
    re.IGNORECASE,
)


def _explicit_day(text: str, said: date) -> tuple[date, str] | None:
    """A calendar date written out ("on February 1st", "2 March"), in the year it was said unless given."""
    m = _EXPLICIT.search(text)
    if m is None:
        return None
    try:
        return date_parser.parse(m.group(), default=datetime(said.year, 1, 1)).date(), m.group()
    except (ValueError, OverflowError):
        return None


def _event_day(event: str, hits: list[Hit]):
    """The turn among those retrieved that best names ``event``, and the day it speaks of.

    Best: most words shared with the event, then one that gives a date
    (written out, or relative to when it was said), then the shorter.
    """
    wanted = _words(event)
    best, best_key = None, (0, 0, 0)
    for hit in hits:
        for m in hit.messages:
            overlap = len(wanted & _words(m.content))
            if not overlap:
                continue
            dated = int(_explicit_day(m.content, m.timestamp.date()) is not None or bool(find_relative_times(m.content, m.timestamp)))
            key = (overlap, dated, -len(m.content))
            if key > best_key:
                best, best_key = m, key
    if best is None:
        return None
    said = best.timestamp.date()
    explicit = _explicit_day(best.content, said)
    if explicit:
        return explicit[0], f'{best.speaker} said on {format_date(said)} "{explicit[1]}"'
    mentions = [t for t in find_relative_times(best.content, best.timestamp) if t.granularity == "day"]
    if mentions:
        return mentions[0].date, f'{best.speaker} said on {format_date(said)} "{mentions[0].text}"'
    return said, f"{best.speaker} said it on {format_date(said)}"


def two_events(question: str) -> tuple[str, str] | None:
    """The two events a "between A and B" / "how many days before A did I B" question names."""
    for pattern in _TWO_EVENTS:
        m = pattern.search(question.strip())
        if m is not None:
            return m.group("a"), m.group("b")
    return None


def between_hint(question: str, hits: list[Hit], found: dict[str, list[Hit]] | None = None) -> list[str]:
    """For a span between two events: each event's day, from the turn that best names it, and the span.

    Listing the spans between every pair of days shown is too much for a
    small model to choose from; naming the two events' days and their
    difference is the arithmetic the question asks for. ``found`` holds, per
    event, the turns a search for that event alone returned (ask() runs it):
    the turn that names an event need not be among those the question found.
    """
    events = two_events(question)
    if events is None:
        return []
    a, b = (_event_day(e, [*(found or {}).get(e, []), *hits]) for e in events)
    if a is None or b is None or a[0] == b[0] and a[1] == b[1]:
        return []
    return [
        f'"{events[0]}": {format_date(a[0])} ({a[1]}).',
        f'"{events[1]}": {format_date(b[0])} ({b[1]}).',
        f"From {format_date(min(a[0], b[0]))} to {format_date(max(a[0], b[0]))}: {span(a[0], b[0])}.",
    ]
