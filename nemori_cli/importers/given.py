"""Messages handed to nemori by a program, or a file it names: read whole and checked, before anything is written.

The Python API (`Memory.ingest`, `read_export`) and the CLI read through
here, so that a program and a file are held to one standard and one set of
error messages: the importers' own.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import ConfigError, InputError
from nemori_cli.importers.collect import Imported
from nemori_cli.importers.selection import Selection, choose


def read_messages(messages: Iterable[Mapping[str, Any] | IncomingMessage], source: str = "<messages>") -> list[IncomingMessage]:
    """Check messages given in code by the JSON Lines reader's own rules, so a program and a file are held to one standard.

    Each mapping is written as one JSON line and read back: one set of rules,
    one set of error messages ("<messages>:3: no 'timestamp' ..."), instead of
    a second validator that would drift from the first.
    """
    from nemori_cli.importers.jsonl import read_jsonl

    if isinstance(messages, (str, bytes, Mapping)):
        raise InputError(f"{source}: expected a list of messages, not a single {type(messages).__name__}")
    lines: list[bytes] = []
    for i, message in enumerate(messages, 1):
        if isinstance(message, IncomingMessage):
            message = {
                "speaker": message.speaker,
                "content": message.content,
                "timestamp": message.timestamp,
                "id": message.source_id,
                "session": message.session,
            }
        if not isinstance(message, Mapping):
            raise InputError(f"{source}:{i}: a {type(message).__name__}, not a mapping; expected {{speaker, content, timestamp}}")
        row = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in message.items() if v is not None}
        try:
            lines.append(json.dumps(row).encode("ascii"))  # escaped: a lone surrogate reaches the reader as the "\\ud800" it refuses
        except (TypeError, ValueError) as e:
            raise InputError(f"{source}:{i}: cannot be read as a message ({e})") from None
    return read_jsonl(io.BytesIO(b"\n".join(lines)), source)


def read_export(
    source: str | Path,
    *,
    format: str = "auto",
    conversations: Iterable[str] = (),
    since: str | None = None,
    until: str | None = None,
    default_timestamp: str | datetime | None = None,
    sample: str | None = None,
    sessions: str | None = None,
    stream: BinaryIO | None = None,
    selection: Selection | None = None,
) -> Imported:
    """A chat export or message file read whole and checked, ready for `Memory.ingest`; nothing is written.

    ``format`` is one of importers.formats.NAMES ("auto" detects it from the
    first bytes: nemori's JSON Lines, ChatGPT, Claude, WhatsApp, Telegram,
    OpenAI-style lists, LongMemEval, LoCoMo). ``conversations`` (ids or
    titles), ``since`` and ``until`` (ISO dates; ``until`` takes the whole day)
    select what is read. ``stream`` reads from an open binary stream instead,
    with ``source`` the name that errors give it. ``selection`` replaces
    conversations, since and until with one already checked (the CLI's, whose
    errors name its flags).
    """
    from nemori_cli.importers import formats
    from nemori_cli.importers.jsonl import parse_timestamp

    name = shown_name(str(source))
    if format not in formats.NAMES:
        raise ConfigError(f"format {format!r} is not one of {', '.join(formats.NAMES)}")
    stamp = default_timestamp if isinstance(default_timestamp, datetime) else None
    if isinstance(default_timestamp, str) and default_timestamp:
        try:
            stamp = parse_timestamp(default_timestamp)
        except ValueError:
            raise ConfigError(f"default timestamp {default_timestamp!r} is not ISO 8601 (e.g. 2023-05-08T13:56:00)") from None
    if selection is None:
        selection = choose(tuple(conversations), since, until)
    own = stream is None
    if stream is None:
        path = Path(source)
        if path.is_dir():
            raise InputError(f"{name}: is a directory; expected a file of messages")
        if not path.is_file():
            raise InputError(f"{name}: no such file")
        try:
            stream = path.open("rb")
        except OSError as e:
            raise InputError(f"{name}: cannot be read ({e.strerror or e})") from None
    try:
        return formats.read(format, stream, name, selection=selection, default_timestamp=stamp, sample=sample, sessions=sessions)
    except OSError as e:  # a read that fails midway (a pipe closed, a disk error)
        raise InputError(f"{name}: cannot be read ({e.strerror or e})") from None
    finally:
        if own:
            stream.close()


def shown_name(source: str) -> str:
    """A file name as errors and reports print it: quoted when it holds a newline or undecodable bytes."""
    return source if source.isprintable() else repr(source)
