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
_TOP_KINDS = {"start_map": "an object", "start_array": "a list", "string": "a string", "number": "a number",
              "boolean": "a boolean", "null": "null"}


class JsonStream:
    """The events of one JSON document; ``at`` is where the reader is, for the error a broken byte gets."""

    def __init__(self, stream: typing.BinaryIO, source: str, expected: str):
        self.source, self.expected = source, expected
        self.at = "the start"
        self._events = iter(ijson.parse(without_bom(stream), use_float=True))

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        try:
            return next(self._events)
        except StopIteration:
            raise
        except (ijson.JSONError, ValueError, RecursionError, OverflowError) as e:  # UnicodeDecodeError is a ValueError
            reason = (str(e).strip().splitlines() or ["cut short"])[0].strip()
            reason = reason if len(reason) <= 80 else reason[:77] + "..."
            raise InputError(f"{self.source}: not valid JSON at {self.at} ({reason}); {self.expected}") from None

    def top(self, wanted: str) -> None:
        """Check the document is ``wanted`` ('start_array' or 'start_map') at the top level."""
        try:
            _, event, _ = next(self)
        except StopIteration:
            raise InputError(f"{self.source}: empty input; {self.expected}") from None
        if event != wanted:
            raise InputError(
                f"{self.source}: the top level is {_TOP_KINDS.get(event, event)}, not {_TOP_KINDS[wanted]}; {self.expected}"
            )

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
        index = 0
        for prefix, event, value in self:
            if prefix == "" and event == "end_array":
                break
            self.at = f"{label} {index}"
            yield index, self.build(event, value)
            index += 1
        for _ in self:  # the rest: ijson refuses trailing garbage only when it is read
            pass
