"""The shape the ChatGPT and Claude readers share: a JSON list of conversations, streamed one at a time into a collector."""

from __future__ import annotations

import typing
from collections.abc import Callable

from nemori_cli.importers.collect import Collector, Imported
from nemori_cli.importers.jsonstream import JsonStream
from nemori_cli.importers.selection import Selection

# How a format reads one conversation: (collector, the conversation as parsed, where it is in the file for errors).
ReadConversation = Callable[[Collector, object, str], None]


def read_conversations(
    stream: typing.BinaryIO,
    source: str,
    selection: Selection,
    *,
    fmt: str,
    label: str,
    namespace: str,
    expected: str,
    conversation: ReadConversation,
) -> Imported:
    """Every conversation of the file's top-level list, read by ``conversation``; ``expected`` is what a wrong file is told."""
    out = Collector(source, fmt, label, selection, namespace)
    json = JsonStream(stream, source, expected)
    for index, item in json.items("conversation"):
        conversation(out, item, f"{source}: conversation {index}")
    return out.result()
