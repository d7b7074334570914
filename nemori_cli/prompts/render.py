"""Compact renderings of messages and dates shared by the prompts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from nemori_cli.dates import annotate_relative_times, format_date
from nemori_cli.domain import Message
from nemori_cli.stages import MESSAGE_CHARS_READ


def when(ts: datetime) -> str:
    """'8 May 2023 13:56': the date spelled out so no model has to parse ISO."""
    return f"{format_date(ts.date())} {ts:%H:%M}"


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def message_lines(messages: Sequence[Message], *, numbered: bool, limit: int = MESSAGE_CHARS_READ, clock: bool = True) -> str:
    """One line per message; relative times annotated with the date they mean.

    The date is written only when it changes, which keeps a window of twenty
    same-day messages short. Without ``clock`` the time of day is left out:
    answer prompts show dates only, because a small model shown "13:56"
    answers "when did..." with the clock time.
    """
    lines = []
    last_day = None
    for i, m in enumerate(messages, start=1):
        day = m.timestamp.date()
        if clock:
            stamp = f"({when(m.timestamp)}) " if day != last_day else f"({m.timestamp:%H:%M}) "
        else:
            stamp = f"({format_date(day)}) " if day != last_day else ""
        last_day = day
        text = clip(annotate_relative_times(m.content, m.timestamp), limit)
        prefix = f"[{i}] " if numbered else ""
        lines.append(f"{prefix}{stamp}{m.speaker}: {text}")
    return "\n".join(lines)
