"""Dates for every layer: relative expressions ("yesterday", "last week") resolved, and dates written out.

A shared helper beside domain.py: prompts, memory modes, the pipeline and
answering all format and resolve dates the same way, so it belongs to none of them.

Why: small models asked to write memories from a chat either turn "yesterday"
into a wrong date or keep it relative, which is meaningless once the memory is
read months later. So before a message is shown to a model we annotate each
relative expression, deterministically, with the date it means relative to the
message's own timestamp ("I went yesterday [7 May 2023]."), and the same finder
can check the model's output afterwards.

The rules are deliberately conservative: a phrase left alone costs little, a
wrong date actively misleads. So:
- weeks run Monday-Sunday; "last/this/next week|weekend" count in those weeks;
- "last <weekday>" is the most recent such day strictly before the anchor date,
  "next <weekday>" the first one strictly after, "this <weekday>" the one in
  the anchor's week;
- vague or ambiguous phrases are skipped: "a few days ago", "on Friday",
  "the last week of the project", "the next month", "last week of May",
  "two or three days ago".
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from nemori_cli.errors import ConfigError

# Spelled out rather than strftime("%B") so the output never depends on locale.
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December")
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}


@dataclass(frozen=True)
class TimeMention:
    start: int  # char offsets in the text: text[start:end] == self.text
    end: int
    text: str  # the expression as written, e.g. "last week"
    resolved: str  # human-readable absolute form, e.g. "the week of 1 May 2023"
    date: date  # representative date: the day, or first day of the week/weekend/month/year
    granularity: str  # "day" | "week" | "weekend" | "month" | "year"


def format_date(d: date) -> str:
    """'7 May 2023': no leading zero, English month names, day-month order
    (unambiguous, unlike 05/07/2023)."""
    return f"{d.day} {_MONTHS[d.month - 1]} {d.year}"


# An ISO date or year-month in running text ("2023-06-16", "2023-10"); digits on either side are not one.
_ISO_IN_TEXT = re.compile(r"(?<![\d-])(\d{4})-(\d{2})(?:-(\d{2}))?(?![\d-])")


def spell_iso_dates(text: str) -> str:
    """ISO dates in ``text`` written as format_date writes them: "2023-06-16" -> "16 June 2023", "2023-10" -> "October 2023".

    A small model sometimes answers a "when" in ISO form although every date it
    was shown is written out; a reader (and LoCoMo's gold, "October, 2023")
    says the month by name. What is not a real date ("2023-13", "2023-02-30")
    is left as written.
    """

    def spelled(m: re.Match[str]) -> str:
        year, month, day = int(m.group(1)), int(m.group(2)), m.group(3)
        if not 1 <= month <= 12:
            return m.group(0)
        if day is None:
            return f"{_MONTHS[month - 1]} {year}"
        try:
            return format_date(date(year, month, int(day)))
        except ValueError:
            return m.group(0)

    return _ISO_IN_TEXT.sub(spelled, text)


def parse_as_of(text: str) -> datetime:
    """A point in conversation time (--as-of): an ISO date-time, or an ISO date meaning the end of that day.

    The end, so that "as of 30 June" includes what was said on 30 June. A
    time without a zone is read as UTC, like the messages' own (domain.to_epoch).
    """
    value = text.strip()
    try:
        return datetime.combine(date.fromisoformat(value), time.max)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"--as-of {text!r} is not an ISO date or date-time (e.g. 2024-06-30 or 2024-06-30T18:00)") from None


def shift_months(d: date, n: int) -> date:
    """``d`` moved by ``n`` calendar months, the day clamped to the target
    month's length (31 March minus one month is 28 or 29 February, not an error)."""
    year, month0 = divmod(d.year * 12 + d.month - 1 + n, 12)
    month = month0 + 1
    return date(year, month, min(d.day, calendar.monthrange(year, month)[1]))


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


# --- the absolute forms, as (resolved, date, granularity) ---------------------

_Resolved = tuple[str, date, str]


def _day(d: date) -> _Resolved:
    return format_date(d), d, "day"


def _week(d: date) -> _Resolved:
    monday = _monday(d)
    return f"the week of {format_date(monday)}", monday, "week"


def _weekend(d: date) -> _Resolved:
    """The Saturday-Sunday of the Monday-Sunday week that contains ``d``."""
    sat = _monday(d) + timedelta(days=5)
    sun = sat + timedelta(days=1)
    if sat.month == sun.month:
        span = f"{sat.day}-{format_date(sun)}"
    elif sat.year == sun.year:
        span = f"{sat.day} {_MONTHS[sat.month - 1]} - {format_date(sun)}"
    else:
        span = f"{format_date(sat)} - {format_date(sun)}"
    return f"the weekend of {span}", sat, "weekend"


def _month(d: date) -> _Resolved:
    return f"{_MONTHS[d.month - 1]} {d.year}", d.replace(day=1), "month"


def _year(year: int) -> _Resolved:
    return str(year), date(year, 1, 1), "year"


def _shift(anchor: date, unit: str, n: int) -> _Resolved:
    """The period ``n`` units away from ``anchor``, at that unit's granularity:
    "two weeks ago" names a week, not a day the speaker never said."""
    if unit == "day":
        return _day(anchor + timedelta(days=n))
    if unit == "week":
        return _week(anchor + timedelta(weeks=n))
    if unit == "month":
        return _month(shift_months(anchor, n))
    return _year(anchor.year + n)


# --- the rules: a pattern and a handler that resolves a match (or None: skip) --

_Handler = Callable[[re.Match[str], date], "_Resolved | None"]
_RULES: list[tuple[re.Pattern[str], _Handler]] = []

# "the last week of the project", "the next month" are relative to something
# else in the sentence, not to the message's time.
_NOT_THE = r"(?<!\bthe\s)"
# A number that is the end of a range or a decimal is vague: "two or three
# days ago", "2-3 weeks ago", "1.5 years ago".
_NOT_RANGE = r"(?<!\bor\s)(?<!\bto\s)(?<![-.,])"
_NUM = r"(?P<num>\d{1,3}|(?:a\s+)?couple(?:\s+of)?|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + ")"
_WEEKDAY = "(?P<wd>" + "|".join(_WEEKDAYS) + ")"


def _rule(pattern: str) -> Callable[[_Handler], _Handler]:
    def register(handler: _Handler) -> _Handler:
        # (?<!\w) ... (?!\w): whole words only, so no "lastly", "weekday",
        # "The yesterdays song"; a possessive ("yesterday's") still matches.
        compiled = re.compile(rf"(?<!\w)(?:{pattern})(?!\w)", re.IGNORECASE)
        _RULES.append((compiled, handler))
        return handler

    return register


def _words(m: re.Match[str], group: int | str = 0) -> str:
    """A matched group lower-cased with runs of whitespace made single spaces."""
    return " ".join(m.group(group).lower().split())


_FIXED = {
    "today": 0,
    "tonight": 0,
    "this morning": 0,
    "this afternoon": 0,
    "this evening": 0,
    "yesterday": -1,
    "last night": -1,
    "tomorrow": 1,
    "the day before yesterday": -2,
    "day before yesterday": -2,
    "the day after tomorrow": 2,
    "day after tomorrow": 2,
}
_FIXED_PATTERN = "|".join(k.replace(" ", r"\s+") for k in sorted(_FIXED, key=len, reverse=True))


@_rule(rf"{_NOT_THE}(?:{_FIXED_PATTERN})")
def _fixed(m: re.Match[str], anchor: date) -> _Resolved:
    return _day(anchor + timedelta(days=_FIXED[_words(m)]))


def _count(m: re.Match[str]) -> int:
    raw = _words(m, "num")
    if raw[0].isdigit():
        return int(raw)
    return 2 if "couple" in raw else _NUMBERS[raw]


@_rule(rf"{_NOT_RANGE}{_NUM}\s+(?P<unit>day|week|month|year)s?\s+(?P<dir>ago|from\s+now)")
def _ago(m: re.Match[str], anchor: date) -> _Resolved:
    sign = -1 if m["dir"].lower() == "ago" else 1
    return _shift(anchor, m["unit"].lower(), sign * _count(m))


# Only days and weeks: "in two years" is far more often a duration than a date.
@_rule(rf"in\s+{_NOT_RANGE}{_NUM}\s+(?P<unit>day|week)s?(?!\s+or\b)")
def _in(m: re.Match[str], anchor: date) -> _Resolved:
    return _shift(anchor, m["unit"].lower(), _count(m))


# "(?!\s+of)": "last week of May" names some other week.
@_rule(
    rf"{_NOT_THE}(?P<rel>last|next|this\s+past|this)\s+"
    r"(?P<span>week|weekend|month|year)(?!\s+of\b)"
)
def _span(m: re.Match[str], anchor: date) -> _Resolved | None:
    rel, span = _words(m, "rel"), m["span"].lower()
    if rel == "this past" and span != "weekend":
        return None  # "this past year" means the last twelve months, not a calendar year
    step = {"last": -1, "this past": -1, "this": 0, "next": 1}[rel]
    if span == "weekend":
        return _weekend(anchor + timedelta(weeks=step))
    return _shift(anchor, span, step)


@_rule(rf"{_NOT_THE}(?P<rel>last|next|this\s+past|this\s+coming|this)\s+{_WEEKDAY}")
def _weekday(m: re.Match[str], anchor: date) -> _Resolved:
    rel, wd, today = _words(m, "rel"), _WEEKDAYS.index(m["wd"].lower()), anchor.weekday()
    if rel in ("last", "this past"):  # strictly before: on a Sunday, "last Sunday" is 7 days back
        return _day(anchor - timedelta(days=(today - wd - 1) % 7 + 1))
    if rel in ("next", "this coming"):  # strictly after
        return _day(anchor + timedelta(days=(wd - today - 1) % 7 + 1))
    return _day(_monday(anchor) + timedelta(days=wd))  # "this": in the anchor's Mon-Sun week


# --- the API -------------------------------------------------------------------


def find_relative_times(text: str, anchor: datetime | date) -> list[TimeMention]:
    """Every relative time expression in ``text`` resolved against ``anchor``
    (the message's time; a datetime is read on its own calendar day, in its own
    timezone). Mentions never overlap, the longest wins ("the day before
    yesterday", not "yesterday"); they come back in text order."""
    day = anchor.date() if isinstance(anchor, datetime) else anchor
    found: list[TimeMention] = []
    for pattern, handler in _RULES:
        for m in pattern.finditer(text):
            try:
                resolved = handler(m, day)
            except (ValueError, OverflowError):  # "999 years ago" in year 500
                resolved = None
            if resolved is not None:
                found.append(TimeMention(m.start(), m.end(), m.group(), *resolved))
    chosen: list[TimeMention] = []
    for cand in sorted(found, key=lambda c: (c.start - c.end, c.start)):
        if all(cand.end <= c.start or cand.start >= c.end for c in chosen):
            chosen.append(cand)
    return sorted(chosen, key=lambda c: c.start)


def annotate_relative_times(text: str, anchor: datetime | date) -> str:
    """``text`` with " [<absolute form>]" after each relative expression:
    "I went yesterday." -> "I went yesterday [7 May 2023].". Idempotent: an
    expression already followed by " [" is left alone."""
    parts: list[str] = []
    pos = 0
    for mention in find_relative_times(text, anchor):
        if text.startswith(" [", mention.end):
            continue
        parts += [text[pos : mention.end], f" [{mention.resolved}]"]
        pos = mention.end
    parts.append(text[pos:])
    return "".join(parts)
