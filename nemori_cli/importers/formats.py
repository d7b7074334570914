"""One entry point for every input format: the CLI names a format (or auto) and gets an ``Imported``.

nemori's JSONL and LoCoMo readers (jsonl.py, locomo.py) predate the selection and
return plain lists; here they get it applied afterwards, so --since and
--until mean the same for every format. For JSONL, --conversation picks
messages by their ``session``. LoCoMo keeps its own --sample and --sessions.
"""

from __future__ import annotations

import typing
from collections import Counter
from datetime import datetime

from nemori_cli.domain import INPUT_FORMATS
from nemori_cli.errors import ConfigError, InputError
from nemori_cli.importers import chatgpt, claude, detect, jsonl, locomo, longmemeval, openai_messages, telegram, whatsapp
from nemori_cli.importers.collect import OUT_OF_DATES, Imported
from nemori_cli.importers.common import quote
from nemori_cli.importers.peek import as_utf8, peek
from nemori_cli.importers.selection import Selection

EXPORTS = {
    "chatgpt": chatgpt.read,
    "claude": claude.read,
    "whatsapp": whatsapp.read,
    "telegram": telegram.read,
    "longmemeval": longmemeval.read,
}
NAMES = INPUT_FORMATS  # declared in domain.py


def read(
    fmt: str,
    stream: typing.BinaryIO,
    source: str,
    *,
    selection: Selection = Selection(),
    default_timestamp: datetime | None = None,
    sample: str | None = None,
    sessions: str | None = None,
) -> Imported:
    """Every problem is an InputError (the input) or a ConfigError (the flags), each one line."""
    stream = as_utf8(stream, source)  # a UTF-16 export (a Windows editor's "Unicode") reads as UTF-8
    if fmt == "auto":
        head, stream = peek(stream, detect.PEEK)
        fmt = detect.detect(head, source)
    if fmt != "locomo" and (sample or sessions):
        raise ConfigError(f"--sample and --sessions apply to --format locomo only (this input is read as {fmt})")
    if fmt == "locomo":
        if selection.conversations:
            raise ConfigError("--conversation does not apply to LoCoMo files: choose a sample with --sample")
        messages = locomo.read_locomo(stream, source, sample_id=sample)
        span = locomo.parse_session_range(sessions)
        messages = locomo.in_sessions(messages, span, source) if span else messages
        return _selected(messages, f"locomo:{sample or ''}:", fmt, selection, source)
    if fmt == "jsonl":
        messages = jsonl.read_jsonl(stream, source, default_timestamp=default_timestamp)
        return _selected(messages, "", fmt, selection, source)
    if fmt == "openai":
        return openai_messages.read(stream, source, selection, default_timestamp=default_timestamp)
    return EXPORTS[fmt](stream, source, selection)


def _selected(messages: list, namespace: str, fmt: str, selection: Selection, source: str) -> Imported:
    """The JSONL and LoCoMo readers' messages with --conversation (their session) and --since/--until applied."""
    if selection.conversations:
        sessions = list(dict.fromkeys(m.session for m in messages if m.session is not None))
        missing = [w for w in selection.conversations if w not in sessions]
        if missing:
            listed = ", ".join(quote(s, 40) for s in sessions[:8]) or "none (no line has a 'session')"
            raise InputError(f"{source}: no message has the session {quote(missing[0])}; sessions: {listed}")
        messages = [m for m in messages if m.session in selection.conversations]
    kept = [m for m in messages if selection.within(m.timestamp)]
    left_out = Counter({OUT_OF_DATES: len(messages) - len(kept)}) if len(kept) < len(messages) else Counter()
    if not kept:
        raise InputError(f"{source}: no messages {selection.describe_dates()} ({len(messages)} outside those dates)")
    return Imported(kept, namespace, fmt, dict(left_out))
