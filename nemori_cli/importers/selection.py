"""Which conversations and which dates to read: `--conversation`, `--since`, `--until`, shared by every reader.

A reader asks while it streams, so what is not chosen is never kept:
``Selection.wants(id, title)`` for each conversation, ``Selection.within(ts)``
for each message.

Naive and aware times are compared by reading a naive time as UTC (as
domain.to_epoch orders them everywhere else): exports that write local
times without a zone (WhatsApp, LongMemEval) are compared as if they were
UTC, which is off by at most the writer's offset from UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time

from nemori_cli.domain import to_epoch
from nemori_cli.errors import ConfigError
from nemori_cli.importers.common import parse_iso


def parse_bound(value: str, *, end: bool) -> datetime:
    """'2023-05-08' or '2023-05-08T13:56' to a datetime; a bare date as the bound of a whole day.

    ``end``: the bound of --until, which is inclusive, so '2023-05-08' there
    means up to the last microsecond of 8 May. Raises ValueError.
    """
    text = value.strip()
    if len(text) == 10:  # YYYY-MM-DD (fromisoformat would take other 10-character forms too)
        day = date.fromisoformat(text)
        return datetime.combine(day, time.max if end else time.min)
    return parse_iso(text)


@dataclass(frozen=True)
class Selection:
    conversations: tuple[str, ...] = ()  # ids or titles; empty: all
    since: datetime | None = None  # inclusive
    until: datetime | None = None  # inclusive

    def matches(self, wanted: str, ident: str | None, title: str | None) -> bool:
        """An id matches exactly; a title matches ignoring case (titles are typed from memory, ids are pasted)."""
        return wanted == ident or (title is not None and wanted.casefold() == title.casefold())

    def wants(self, ident: str | None, title: str | None) -> bool:
        return not self.conversations or any(self.matches(w, ident, title) for w in self.conversations)

    def within(self, ts: datetime) -> bool:
        moment = to_epoch(ts)
        if self.since is not None and moment < to_epoch(self.since):
            return False
        return self.until is None or moment <= to_epoch(self.until)

    def describe_dates(self) -> str:
        """'since 2023-05-01 until 2023-05-31', for 'no messages' errors."""
        parts = []
        if self.since is not None:
            parts.append(f"since {self.since.isoformat()}")
        if self.until is not None:
            parts.append(f"until {self.until.isoformat()}")
        return " ".join(parts)


def choose(
    conversations: tuple[str, ...], since: str | None, until: str | None, *, names: tuple[str, str] = ("since", "until")
) -> Selection:
    """A Selection from text bounds, checked; errors call the bounds by ``names`` (the CLI passes its flags, "--since", "--until")."""
    bounds: list[datetime | None] = []
    for name, value, end in ((names[0], since, False), (names[1], until, True)):
        if value is None:
            bounds.append(None)
            continue
        try:
            bounds.append(parse_bound(value, end=end))
        except ValueError:
            raise ConfigError(f"{name} {value!r} is not a date or date-time (ISO 8601, e.g. 2023-05-08 or 2023-05-08T13:56)") from None
    chosen = Selection(tuple(conversations), *bounds)
    if chosen.since and chosen.until and to_epoch(chosen.since) > to_epoch(chosen.until):
        raise ConfigError(f"{names[0]} {since!r} is after {names[1]} {until!r}; expected since <= until")
    return chosen
