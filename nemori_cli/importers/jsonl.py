"""Read nemori's own JSON Lines format into IncomingMessages.

Every problem a user can cause becomes one InputError line that names the
source and the 1-based line, what is wrong and what is expected, so the CLI
can print it as is. The reader takes bytes, not text, so an encoding problem
is reported where it is instead of as a decoder traceback.

One object per line, blank lines skipped. ``speaker`` (alias ``role``),
``content`` (alias ``text``), ``timestamp`` (ISO 8601; a trailing Z means UTC),
optional ``id`` and ``session`` (string or integer). Other fields are ignored.
The timestamp has no aliases on purpose: guessing at ``time``/``date`` would
silently accept files whose times mean something else.
"""

from __future__ import annotations

import json
import typing
from datetime import datetime

from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import InputError
from nemori_cli.importers.common import decode as _decode
from nemori_cli.importers.common import loads as _loads
from nemori_cli.importers.common import parse_iso as parse_timestamp
from nemori_cli.importers.common import quote as _quote
from nemori_cli.importers.common import valid_text as _valid_text

_BOM = b"\xef\xbb\xbf"
_TS_EXAMPLE = "ISO 8601, e.g. 2023-05-08T13:56:00"
_ONE_OBJECT = "expected one JSON object per line"
_JSON_KINDS = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _opt_key(obj: dict, name: str, where: str) -> str | None:
    """id/session: a string or an integer (bool is not a number here)."""
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and value.strip():
        return _valid_text(value, where, name)
    raise InputError(f"{where}: '{name}' is {_quote(value)}; expected a non-empty string or an integer")


def _text_field(obj: dict, names: tuple[str, str], where: str, what: str) -> str:
    key = names[0] if names[0] in obj else names[1]
    if key not in obj:
        raise InputError(f"{where}: no '{names[0]}' (or '{names[1]}'); each line needs {what}")
    value = obj[key]
    if not isinstance(value, str):
        raise InputError(f"{where}: '{key}' is {_quote(value)}; expected a string")
    if not value.strip():
        raise InputError(f"{where}: '{key}' is empty; expected {what}")
    return _valid_text(value, where, key)


def read_jsonl(stream: typing.BinaryIO, source_name: str, *, default_timestamp: datetime | None = None) -> list[IncomingMessage]:
    """Read JSON Lines; ``default_timestamp`` fills only missing timestamps."""
    messages: list[IncomingMessage] = []
    seen_ids: dict[str, int] = {}
    # A line is in at most two forms at once (issue 42, defect 15: a 50 MB message was held four times over):
    # each form (the bytes, without the line ending, the text, the parsed object) is let go as soon as the next
    # is made, and a blank line is told by isspace(), which copies nothing. No enumerate(): the tuple it reuses
    # keeps the last line's bytes alive. Reading a line then costs about twice its size at its peak.
    lineno = 0
    for raw in stream:
        lineno += 1
        where = f"{source_name}:{lineno}"
        if lineno == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM) :]  # editors on Windows add one; it is not content
        line = raw.rstrip(b"\r\n")
        del raw
        text = _decode(line, source_name, lineno)
        del line
        if not text or text.isspace():
            continue
        try:
            obj = _loads(text)
            del text
        except json.JSONDecodeError as e:
            raise InputError(f"{where}: not valid JSON ({e.msg} at column {e.colno}); {_ONE_OBJECT}") from None
        except ValueError as e:
            raise InputError(f"{where}: not usable JSON ({e}); {_ONE_OBJECT}") from None
        if not isinstance(obj, dict):
            kind = _JSON_KINDS.get(type(obj), "value")
            raise InputError(f"{where}: a JSON {kind}, not an object; {_ONE_OBJECT}")
        speaker = _text_field(obj, ("speaker", "role"), where, "a speaker name")
        content = _text_field(obj, ("content", "text"), where, "the message text")
        stamp = obj.get("timestamp")
        if stamp is None:
            if default_timestamp is None:
                raise InputError(f"{where}: no 'timestamp' ({_TS_EXAMPLE}); pass --default-timestamp to supply one")
            timestamp = default_timestamp
        else:
            try:
                if not isinstance(stamp, str):
                    raise ValueError
                timestamp = parse_timestamp(stamp)
            except ValueError:
                raise InputError(f"{where}: 'timestamp' {_quote(stamp)} is not a date-time; expected {_TS_EXAMPLE}") from None
        source_id = _opt_key(obj, "id", where)
        if source_id is not None:
            if source_id in seen_ids:
                raise InputError(
                    f"{where}: id {_quote(source_id)} already used on line {seen_ids[source_id]}; expected ids unique within one input"
                )
            seen_ids[source_id] = lineno
        messages.append(
            IncomingMessage(
                speaker=speaker,
                content=content,
                timestamp=timestamp,
                source_id=source_id,
                session=_opt_key(obj, "session", where),
                line=lineno,
            )
        )
    if not messages:
        raise InputError(f"{source_name}: no messages (empty input)")
    return messages
