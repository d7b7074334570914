"""The days a question names ("on 3 June, 2023", "in December 2023", "in June"), as spans of conversation time.

Why: a question that names a day is about what was said around that day,
and neither meaning nor words find a day: MiniLM puts "What did Maria
donate in December 2023?" near every donation, and full text cannot match
"December" against a turn whose date is only its timestamp. Chunk retrieval
has no timestamps to use; a memory with absolute dates does.

The spans are generous, because a question's day is often not the day its
answer was said: LoCoMo asks about "May 23, 2023" from a session of 27 May
("I got accepted on Tuesday"), and about "Aug 15th" from one of 17 August.
So a named day reaches from the day before to a week after, and a month
from the day before its first to a week after its last. A month named
without a year ("in June") is that month of every year the memory holds.

Only absolute dates are read here. A relative one ("last week") has no
anchor in a question but "now", and what a question means by it is
guessed better by the reader than by a rule. Finding a date phrase inside
free text is not what a date parser does (dateutil's fuzzy parse takes one
date from scattered tokens: "between August 11 and August 15 2023" would be
one wrong day), so the phrases are found by the patterns below and each
one's parts are read directly.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

_MONTH_NAMES = {name.lower(): n for n, name in enumerate(calendar.month_name) if name}
_MONTH_NAMES.update({name.lower(): n for n, name in enumerate(calendar.month_abbr) if name})
_MONTH_NAMES["sept"] = 9
_MONTH = r"(?P<{0}>" + "|".join(sorted(_MONTH_NAMES, key=len, reverse=True)) + r")\.?"
# Month names that are also common words ("this may be", "a march", "by Jan"): read as months only when capitalised.
_AMBIGUOUS = frozenset({"may", "march", "mar", "jan"})
# Abbreviations that alone, with no day or year, are a name more often than a month ("a painting by Jan").
_NAME_LIKE = frozenset({"jan", "mar"})
# A day, not a clock time ("3:15", "May 3 am") nor the start of a longer number.
_DAY = r"(?P<{0}>\d{{1,2}})(?:st|nd|rd|th)?\b(?!\s*(?:am|pm)\b|:\d)"
_YEAR = r"(?P<{0}>(?:19|20)\d\d)"

# "3 June, 2023", "8th of December 2023", "21 May"
_DAY_MONTH = re.compile(
    r"\b" + _DAY.format("d") + r"\s+(?:of\s+)?" + _MONTH.format("m") + r"(?:,?\s*" + _YEAR.format("y") + r")?\b", re.IGNORECASE
)
# "May 3, 2023", "December 1,2023", "Aug 15th"
_MONTH_DAY = re.compile(r"\b" + _MONTH.format("m") + r"\s+" + _DAY.format("d") + r"(?:,?\s*" + _YEAR.format("y") + r"\b)?", re.IGNORECASE)
# "December 2023", "June, 2023"
_MONTH_YEAR = re.compile(r"\b" + _MONTH.format("m") + r",?\s+" + _YEAR.format("y") + r"\b", re.IGNORECASE)
# "in June", "during early March": a month alone only after a word that makes it a time ("May I", "march on" are not)
_BARE_MONTH = re.compile(
    r"\b(?:in|during|of|since|until|till|before|after|by|from|through|between|and|or|to|last|this|next)\s+(?:(?:early|late|mid)[\s-]+)?"
    + _MONTH.format("m")
    + r"(?![\w-]|\s*\d)",
    re.IGNORECASE,
)

DAY_BEFORE = timedelta(days=1)  # a named day reaches back one day (a session just after midnight, a zone apart)
WEEK_AFTER = timedelta(days=8)  # and forward a week: what happened on a day is often told a few days later


@dataclass(frozen=True)
class NamedDate:
    """An absolute date a text names: a day or a whole month, with or without its year."""

    start: int  # character offsets of the phrase in the text
    end: int
    month: int
    day: int | None = None  # None: the whole month
    year: int | None = None  # None: not said ("in June")

    def first_and_last(self, year: int) -> tuple[date, date] | None:
        """The first and last day meant, in ``year`` when none was said; None for a day the month lacks ("31 June")."""
        y = self.year or year
        if self.day is None:
            return date(y, self.month, 1), date(y, self.month, calendar.monthrange(y, self.month)[1])
        if self.day > calendar.monthrange(y, self.month)[1] or self.day < 1:
            return None
        return date(y, self.month, self.day), date(y, self.month, self.day)


def named_dates(text: str) -> list[NamedDate]:
    """Every absolute date ``text`` names, in text order; phrases never overlap (the longest wins).

    A date without a year takes the year of a later one in the same text
    ("between August 11 and August 15 2023", "between June and August 2023"),
    as English leaves it out.
    """
    found: list[NamedDate] = []
    for pattern in (_DAY_MONTH, _MONTH_DAY, _MONTH_YEAR, _BARE_MONTH):
        for m in pattern.finditer(text):
            parts = m.groupdict()
            name = parts["m"].lower().rstrip(".")
            if name in _AMBIGUOUS and not parts["m"][0].isupper():
                continue
            if pattern is _BARE_MONTH and name in _NAME_LIKE:
                continue
            month = _MONTH_NAMES[name]
            day = int(parts["d"]) if parts.get("d") else None
            year = int(parts["y"]) if parts.get("y") else None
            start = m.start("m") if pattern is _BARE_MONTH else m.start()
            found.append(NamedDate(start, m.end(), month, day, year))
    chosen: list[NamedDate] = []
    for cand in sorted(found, key=lambda c: (c.start - c.end, c.start)):
        if all(cand.end <= c.start or cand.start >= c.end for c in chosen):
            chosen.append(cand)
    chosen.sort(key=lambda c: c.start)
    out = []
    for i, named in enumerate(chosen):
        if named.year is None:
            later = next((c.year for c in chosen[i + 1 :] if c.year is not None), None)
            named = NamedDate(named.start, named.end, named.month, named.day, later)
        out.append(named)
    return out


def spans(question: str, years: range) -> list[tuple[float, float]]:
    """The spans of conversation time (epoch seconds, UTC, inclusive) that ``question``'s dates point at, merged.

    ``years``: the years the memory holds, for a date named without one. No date named: no span.
    """
    return spans_of(named_dates(question), years)


def spans_of(dates: list[NamedDate], years: range) -> list[tuple[float, float]]:
    """``spans`` for dates already read (search reads them once, to skip the memory's years when there are none)."""
    out: list[tuple[float, float]] = []
    for named in dates:
        for year in [named.year] if named.year else years:
            days = named.first_and_last(year)
            if days is None:
                continue
            first = datetime.combine(days[0], datetime.min.time(), UTC) - DAY_BEFORE
            after = datetime.combine(days[1], datetime.min.time(), UTC) + WEEK_AFTER
            out.append((first.timestamp(), after.timestamp()))
    merged: list[tuple[float, float]] = []
    for lo, hi in sorted(out):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged
