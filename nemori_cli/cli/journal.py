"""Memory as a personal journal in Markdown: one file per month, an index.

Rendering only: the command (cli/export_cmd.py) reads the memory and writes
the files. Every date is written out absolutely ("Monday 8 May 2023"),
because the journal is read long after, when "yesterday" means nothing.
Merged episodes are left out (the episode they were merged into tells their
story), and so are ids: a reader follows dates and links, not E12 or F7.
Messages not built into episodes yet (after `ingest --build later`) are the
memory until the build runs, so each month lists them by day, as said.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import TypeVar

from nemori_cli.cli.render import visible
from nemori_cli.dates import format_date
from nemori_cli.domain import Episode, Fact, Message, Note, to_epoch
from nemori_cli.services.export import Contents

_Said = TypeVar("_Said", Note, Message)

MARK = "<!-- nemori journal: written by `nemori export --format markdown`, rewritten by the next one -->"
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")  # not strftime: no locale


Memory = Contents  # what the journal is written from: services/export.contents reads it


def day(ts: datetime) -> str:
    return f"{_WEEKDAYS[ts.weekday()]} {format_date(ts)}"


def span(start: datetime, end: datetime) -> str:
    """'Monday 8 May 2023, 10:00–10:03', or both days when it runs past midnight."""
    if start.date() == end.date():
        return f"{day(start)}, {start:%H:%M}–{end:%H:%M}" if end > start else f"{day(start)}, {start:%H:%M}"
    return f"{day(start)}, {start:%H:%M} – {day(end)}, {end:%H:%M}"


def month_file(ts: datetime) -> str:
    return f"{ts:%Y-%m}.md"


def _month_title(ts: datetime) -> str:
    return f"{_MONTHS[ts.month - 1]} {ts.year}"


def _line(text: str) -> str:
    """Text on one line (a title in a heading, a fact in a list), control characters shown as \\xNN."""
    return " ".join(visible(text).split()) or "(untitled)"


def render(memory: Memory) -> dict[str, str]:
    """File name -> Markdown: index.md and one YYYY-MM.md per month with an episode or a note."""
    episodes = sorted((e for e in memory.episodes if e.status == "active"), key=lambda e: (to_epoch(e.start), e.id))
    by_id = {e.id: e for e in memory.episodes}
    facts_of: dict[int, list[Fact]] = defaultdict(list)
    for f in memory.facts:
        for eid in f.source_episode_ids:
            facts_of[eid].append(f)
    notes_of: dict[int, list[Note]] = defaultdict(list)
    loose: list[Note] = []  # notes made from messages (--memory amem): by day, not by episode
    for n in memory.notes:
        (notes_of[n.episode_id] if n.episode_id is not None else loose).append(n)
    facts = {f.id: f for f in memory.facts}

    months: dict[str, list[str]] = defaultdict(list)
    titles: dict[str, str] = {}
    for e in episodes:
        name = month_file(e.start)
        titles[name] = _month_title(e.start)
        months[name].append(_episode(e, facts_of[e.id], notes_of[e.id], facts, by_id))
    for d, notes in _by_day(loose):
        name = month_file(d)
        titles[name] = _month_title(d)
        months[name].append(_notes_of_day(d, notes))
    unbuilt_in: dict[str, int] = defaultdict(int)
    for d, said in _by_day(memory.unbuilt):
        name = month_file(d)
        titles[name] = _month_title(d)
        unbuilt_in[name] += len(said)
        months[name].append(_unbuilt_day(d, said))
    files = {name: f"{MARK}\n\n# {titles[name]}\n\n" + "\n".join(sections) for name, sections in sorted(months.items())}
    files["index.md"] = _index(memory, episodes, loose, titles, unbuilt_in)
    return files


def _episode(e: Episode, facts: list[Fact], notes: list[Note], all_facts: dict[int, Fact], episodes: dict[int, Episode]) -> str:
    out = [f'<a id="e{e.id}"></a>', f"## {span(e.start, e.end)} · {_line(e.title)}", "", visible(e.narrative.strip()), ""]
    known = [_fact(f, all_facts, episodes) for f in sorted(facts, key=lambda f: f.id)] + [f"- {_line(n.content)}" for n in notes]
    if known:
        out += ["**Facts drawn from it:**", "", *known, ""]
    return "\n".join(out)


def _fact(f: Fact, facts: dict[int, Fact], episodes: dict[int, Episode]) -> str:
    if f.status == "active":
        return f"- {_line(f.text)}"
    later = facts.get(f.superseded_by) if f.superseded_by is not None else None
    if later is None:
        return f"- ~~{_line(f.text)}~~ *(no longer held)*"
    when = [episodes[i].start for i in later.source_episode_ids if i in episodes]
    since = f", since {format_date(min(when, key=to_epoch))}" if when else ""
    return f"- ~~{_line(f.text)}~~ *(later{since}: {_line(later.text)})*"


def _by_day(items: list[_Said]) -> list[tuple[datetime, list[_Said]]]:
    """Notes or messages grouped by the day they were said, oldest first: [(the first one's time, the day's items)]."""
    days: dict = defaultdict(list)
    for n in sorted(items, key=lambda n: (to_epoch(n.timestamp), n.id)):
        days[n.timestamp.date()].append(n)
    return [(group[0].timestamp, group) for _, group in sorted(days.items())]


def _unbuilt_day(d: datetime, said: list[Message]) -> str:
    lines = [f"## {day(d)} · messages not built into episodes yet", ""]
    lines += [f"- {m.timestamp:%H:%M} **{_line(m.speaker)}**: {_line(m.content)}" for m in said]
    return "\n".join(lines) + "\n"


def _notes_of_day(d: datetime, notes: list[Note]) -> str:
    lines = [f"## {day(d)} · notes", ""]
    for n in notes:
        tags = f" *({', '.join(n.tags)})*" if n.tags else ""
        lines.append(f"- {n.timestamp:%H:%M} {_line(n.content)}{tags}")
    return "\n".join(lines) + "\n"


def _index(memory: Memory, episodes: list[Episode], loose: list[Note], titles: dict[str, str], unbuilt_in: dict[str, int]) -> str:
    out = [MARK, "", f"# The journal of {memory.user}", ""]
    if episodes:
        first, last = episodes[0].start, max((e.end for e in episodes), key=to_epoch)
        held = sum(1 for f in memory.facts if f.status == "active")
        out.append(
            f"{len(episodes)} episodes from {format_date(first)} to {format_date(last)}; {_count(held, 'fact') or 'no facts'} known now."
        )
    if loose:
        out.append(f"{len(loose)} notes from {format_date(loose[0].timestamp)} to {format_date(loose[-1].timestamp)}.")
    if memory.unbuilt:
        first, last = memory.unbuilt[0].timestamp, memory.unbuilt[-1].timestamp
        how = "are kept as they were said, below by month" if not episodes and not loose else "are listed by day in their months"
        out.append(
            f"{_count(len(memory.unbuilt), 'message')} from {format_date(first)} to {format_date(last)} are not built into "
            f"episodes yet: they {how}; `nemori build` builds them."
        )
    elif memory.pending:
        out.append(f"{_count(memory.pending, 'message')} not built into memory yet: `nemori build` builds them.")
    if not episodes and not loose and not memory.unbuilt:
        out.append("Nothing has been remembered yet.")
    out.append("")
    if memory.summary:
        out += ["## In short", "", memory.summary.strip(), ""]
    if titles:
        out += ["## Months", ""]
    for name in sorted(titles):
        in_month = [e for e in episodes if month_file(e.start) == name]
        notes = sum(1 for n in loose if month_file(n.timestamp) == name)
        said = _count(unbuilt_in.get(name, 0), "message")
        counts = ", ".join(p for p in (_count(len(in_month), "episode"), _count(notes, "note"), said and f"{said} not built yet") if p)
        out.append(f"- [{titles[name]}]({name}): {counts}")
        out += [f"  - [{format_date(e.start)}: {_line(e.title)}]({name}#e{e.id})" for e in in_month]
    known = [f for f in memory.facts if f.status == "active"]
    if known:
        out += ["", "## What is known now", ""]
        out += [_known(f, {e.id: e for e in episodes}) for f in known]
    return "\n".join(out) + "\n"


def _known(f: Fact, episodes: dict[int, Episode]) -> str:
    """A fact that still holds, linked to the first episode it came from."""
    sources = sorted((episodes[i] for i in f.source_episode_ids if i in episodes), key=lambda e: (to_epoch(e.start), e.id))
    if not sources:
        return f"- {_line(f.text)}"
    e = sources[0]
    return f"- {_line(f.text)} ([{format_date(e.start)}]({month_file(e.start)}#e{e.id}))"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}" if n else ""
