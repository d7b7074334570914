"""Streaming JSON for the export readers: ijson events in, one InputError line out for a broken file.

A ChatGPT or Telegram export can be a gigabyte. ijson reads it in chunks and
the readers build one conversation (or one message) at a time, so a file is
never held whole, and a conversation that was not chosen is dropped as soon
as it has been read past.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator

import ijson
from ijson.common import ObjectBuilder

from nemori_cli.errors import InputError
from nemori_cli.importers.peek import without_bom

Event = tuple[str, str, object]
_STARTS = {"start_map": "end_map", "start_array": "end_array"}
_TOP_KINDS = {
    "start_map": "an object",
    "start_array": "a list",
    "string": "a string",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
}


MAX_DEPTH = 256  # no export nests deeper; much deeper input is an attack on the parser, not a chat


class TooDeep(ValueError):
    pass


def parse_events(stream: typing.BinaryIO) -> Iterator[Event]:
    """ijson.parse's (prefix, event, value), with the depth bounded.

    ijson.parse keeps a prefix string per level, so input nested N deep costs
    N² bytes (100,000 brackets: gigabytes). Here the prefixes are kept the
    same way ijson computes them, but nothing deeper than MAX_DEPTH is read.
    """
    prefixes = [""]  # prefixes[i]: the prefix of what is i levels down
    for event, value in ijson.basic_parse(stream, use_float=True):
        if event == "map_key":
            yield prefixes[-2], event, value
            prefixes[-1] = f"{prefixes[-2]}.{value}" if len(prefixes) > 2 else str(value)  # no dot at the top
            continue
        if event in ("start_map", "start_array"):
            if len(prefixes) > MAX_DEPTH:
                raise TooDeep(f"nested more than {MAX_DEPTH} levels deep")
            yield prefixes[-1], event, value
            prefixes.append("" if event == "start_map" else (f"{prefixes[-1]}.item" if len(prefixes) > 1 else "item"))
        elif event in ("end_map", "end_array"):
            prefixes.pop()
            yield prefixes[-1], event, value
        else:
            yield prefixes[-1], event, value


def _reason(e: Exception) -> str:
    """The decoder's complaint, on one short line (yajl adds the text and a caret on lines of their own, as bytes)."""
    raw = e.args[0] if e.args else ""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    first = (text.strip().splitlines() or [type(e).__name__])[0].strip()
    return first if len(first) <= 80 else first[:77] + "..."


class JsonStream:
    """The events of one JSON document; ``at`` is where the reader is, for the error a broken byte gets."""

    def __init__(self, stream: typing.BinaryIO, source: str, expected: str):
        self.source, self.expected = source, expected
        self.at = "the start"
        self._events = parse_events(without_bom(stream))
        self._started = False

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        try:
            event = next(self._events)
        except StopIteration:
            raise
        except (ijson.JSONError, ValueError, RecursionError, OverflowError) as e:  # UnicodeDecodeError is a ValueError
            if not self._started and "premature EOF" in _reason(e):
                raise InputError(f"{self.source}: empty input; {self.expected}") from None
            what = "not usable JSON" if isinstance(e, TooDeep) else "not valid JSON"
            raise InputError(f"{self.source}: {what} at {self.at} ({_reason(e)}); {self.expected}") from None
        self._started = True
        return event

    def top(self, wanted: str) -> None:
        """Check the document is ``wanted`` ('start_array' or 'start_map') at the top level."""
        try:
            _, event, _ = next(self)
        except StopIteration:
            raise InputError(f"{self.source}: empty input; {self.expected}") from None
        if event != wanted:
            raise InputError(f"{self.source}: the top level is {_TOP_KINDS.get(event, event)}, not {_TOP_KINDS[wanted]}; {self.expected}")

    def build(self, event: str, value: object) -> object:
        """The whole value that starts with this event (iteratively: a deeply nested value is no recursion)."""
        builder = ObjectBuilder()
        builder.event(event, value)
        depth = 1 if event in _STARTS else 0
        while depth:
            try:
                _, ev, val = next(self)
            except StopIteration:
                raise InputError(f"{self.source}: cut short at {self.at}; {self.expected}") from None
            builder.event(ev, val)
            if ev in _STARTS:
                depth += 1
            elif ev in ("end_map", "end_array"):
                depth -= 1
        return builder.value

    def items(self, label: str) -> Iterator[tuple[int, object]]:
        """The items of the top-level list, built one at a time; ``at`` names the one being read."""
        self.top("start_array")
        for index, (prefix, event, value) in enumerate(self):
            if prefix == "" and event == "end_array":
                break
            self.at = f"{label} {index}"
            yield index, self.build(event, value)
        for _ in self:  # the rest: ijson refuses trailing garbage only when it is read
            pass
