"""Small helpers every reader shares: quoting values into error lines, checking text, reading times.

They live here, not in one reader, so that every format words its errors and
reads its times the same way.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import SupportsFloat, SupportsIndex

from nemori_cli.errors import InputError

# What a JSON value is called in an error line ("a JSON string, not an object").
JSON_KINDS = {
    list: "array",
    dict: "object",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}

# A lone surrogate: half of a UTF-16 pair, which no UTF-8 text holds (a pair in JSON, "\\ud83d\\ude00", decodes to one character).
_SURROGATE = re.compile("[\ud800-\udfff]")

# Epoch numbers above this are milliseconds (JavaScript's Date.now()): read
# as seconds they would fall after the year 5000, which no chat does.
_MILLISECONDS_FROM = 1e11


def quote(value: object, limit: int = 60) -> str:
    """repr() keeps the error on one line; the cut keeps it readable."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def kind(value: object) -> str:
    """'a JSON string' for error lines; a number type the decoder made (Decimal) is still a number."""
    return f"a JSON {JSON_KINDS.get(type(value), 'number')}"


def valid_text(value: str, where: str, field: str) -> str:
    """Refuse a lone surrogate (JSON's "\\ud800" escape): it is not text and cannot be stored or printed."""
    # Searched for, not found by encoding: encoding copies the text, 50 MB more for a 50 MB message (issue 42,
    # defect 15). ASCII text, the most of it, holds none (isascii() reads a flag, not the text).
    found = None if value.isascii() else _SURROGATE.search(value)
    if found:
        raise InputError(
            f"{where}: '{field}' holds a lone surrogate (U+{ord(found.group()):04X} at character {found.start() + 1});"
            " expected valid Unicode text"
        )
    return value


def decode(raw: bytes, source_name: str, first_line: int = 1) -> str:
    """UTF-8 bytes to text, or one line naming the line and column of the first bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        # Point at the bad byte by line and column: a byte offset is useless in an editor.
        line = first_line + raw.count(b"\n", 0, e.start)
        column = e.start - raw.rfind(b"\n", 0, e.start)
        raise InputError(
            f"{source_name}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column {column}); expected UTF-8 encoded input"
        ) from None


def loads(text: str) -> object:
    """json.loads, with what it raises besides JSONDecodeError made into a ValueError with a short reason."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError:  # e.g. an integer of more than 4300 digits
        raise ValueError("a number too long to read") from None


def from_epoch(value: object) -> datetime:
    """Seconds (or milliseconds) since 1970, as a number or a string of digits, to a UTC-aware datetime.

    Raises ValueError for anything else, including times no datetime holds.
    """
    if isinstance(value, bool) or value is None:
        raise ValueError("not a number")
    if isinstance(value, str):
        text = value.strip()
        if not text or not text.lstrip("-").replace(".", "", 1).isdigit() or not text.isascii():
            raise ValueError("not a number")
        value = float(text)
    if not isinstance(value, (SupportsFloat, SupportsIndex)):
        raise ValueError("not a number")
    try:
        seconds = float(value)  # int, float, or the Decimal a JSON decoder made
    except (TypeError, ValueError, OverflowError):
        raise ValueError("not a number") from None
    if not math.isfinite(seconds):
        raise ValueError("not a finite number")
    if abs(seconds) >= _MILLISECONDS_FROM:
        seconds /= 1000
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise ValueError("out of range") from None


def parse_iso(value: str) -> datetime:
    """ISO 8601; a trailing 'Z' gives UTC-aware, no offset stays naive. Raises ValueError."""
    text = value.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    if not text:
        raise ValueError("empty timestamp")
    return datetime.fromisoformat(text)  # raises ValueError with its own reason
