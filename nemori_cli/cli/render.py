"""Turning domain objects into JSON for scripts and rich text for people."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from nemori_cli.domain import Episode, Fact, Hit, Message, Note, NoteChange


def warn_changed(count: int, ids: list[str], *, would: bool = False) -> None:
    """One stderr line: messages whose id was stored before with other content, and which keep the stored text."""
    if not count:
        return
    shown = ", ".join(repr(i if len(i) <= 40 else i[:37] + "...") for i in ids[:5]) + (", ..." if count > 5 else "")
    kept = "would keep" if would else "kept"
    sys.stderr.write(
        f"nemori: {count} message{'s' if count != 1 else ''} already stored under the same id with different content"
        f" {kept} the stored text, which memory was built from ({shown}); give an edited message a new id to add it\n"
    )


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def print_json_line(data: Any) -> None:
    """One JSON object on one line, flushed: JSON Lines, for output a script reads as it comes."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def message_json(m: Message) -> dict:
    return {
        "id": m.id,
        "source_id": m.source_id,
        "session": m.session,
        "speaker": m.speaker,
        "content": m.content,
        "timestamp": m.timestamp.isoformat(),
        "episode_id": m.episode_id,
    }


def episode_json(e: Episode, *, with_messages: bool = True) -> dict:
    data = {
        "id": e.id,
        "title": e.title,
        "narrative": e.narrative,
        "start": e.start.isoformat(),
        "end": e.end.isoformat(),
        "boundary": e.boundary,
        "status": e.status,
        "superseded_by": e.superseded_by,
        "superseded_reason": e.superseded_reason,
        "created_at": e.created_at,
        "message_count": len(e.messages),
        "message_ids": [m.source_id if m.source_id is not None else m.key for m in e.messages],
    }
    if with_messages:
        data["messages"] = [message_json(m) for m in e.messages]
    return data


def fact_json(f: Fact) -> dict:
    return {
        "id": f.id,
        "text": f.text,
        "status": f.status,
        "created_at": f.created_at,
        "source_episode_ids": list(f.source_episode_ids),
        "origin": f.origin,
        "superseded_by": f.superseded_by,
        "superseded_reason": f.superseded_reason,
        "superseded_at": f.superseded_at,  # the ingest's clock
        # Conversation time (null: not known, see store/migrations.py schema 7).
        "episode_id": f.episode_id,
        "valid_from": f.valid_from.isoformat() if f.valid_from else None,
        "valid_until": f.valid_until.isoformat() if f.valid_until else None,
    }


def validity(f: Fact) -> str:
    """When a fact was true in the conversation's time, in words."""
    if f.valid_from is None:
        return "valid from: not recorded (no source episode to date it by)"
    since = f"valid from {f.valid_from:%Y-%m-%d %H:%M}"
    if f.valid_until is not None:
        return f"{since} until {f.valid_until:%Y-%m-%d %H:%M}"
    return f"{since}, still valid" if f.status == "active" else f"{since}, until: not recorded"


def note_json(n: Note) -> dict:
    return {
        "id": n.id,
        "content": n.content,
        "timestamp": n.timestamp.isoformat(),
        "keywords": list(n.keywords),
        "tags": list(n.tags),
        "context": n.context,
        "origin": n.origin,
        "message_id": n.message_id,
        "episode_id": n.episode_id,
        "links": list(n.links),
        "created_at": n.created_at,
        "updated_at": n.updated_at,
    }


def change_json(c: NoteChange) -> dict:
    return {"note_id": c.note_id, "made_by": c.made_by, "field": c.field, "before": c.before, "after": c.after, "at": c.created_at}


def hit_json(h: Hit) -> dict:
    return {
        "kind": h.kind,
        "id": h.id,
        "score": round(h.score, 6),
        "similarity": None if h.similarity is None else round(h.similarity, 4),
        "vector_rank": h.vector_rank,
        "text_rank": h.text_rank,
        "time": h.start.isoformat(),
        "end": h.end.isoformat(),
        "title": h.title,
        "text": h.text,
        "messages": [message_json(m) for m in h.messages],
        **({"context": h.context, "linked_from": h.linked_from} if h.kind == "note" else {}),
    }


def stamp(ts) -> str:
    """'2024-03-04 19:09', with the UTC offset when the input gave one ('2024-03-04 19:09 +02:00'): the same clock
    time in two zones is two moments, and a chat export in local time should not read as UTC."""
    text = f"{ts:%Y-%m-%d %H:%M}"
    offset = ts.utcoffset() if getattr(ts, "tzinfo", None) is not None else None
    if offset is None:
        return text
    return text + (" UTC" if not offset else f" {ts:%z}"[:-2] + ":" + f"{ts:%z}"[-2:])


# Control characters other than newline and tab (C0, DEL, C1): stored as given, since the memory keeps
# what was said, but never sent raw to a terminal or a Markdown file, where a NUL makes grep call the
# output binary and an escape sequence would drive the terminal. --json escapes them itself (\u0000).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with each control character (newline and tab aside) written as \\xNN."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


def esc(text: object) -> str:
    """Memory text printed through rich: "[7 May 2023]" must show, not be read as markup; control characters shown as \\xNN."""
    from rich.markup import escape

    return escape(visible(str(text)))


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)
