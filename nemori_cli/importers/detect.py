"""`--format auto`: which reader an input is for, from its first bytes (and, failing those, its name).

Only a bounded prefix is looked at (``PEEK`` bytes; peek.py puts them back for
stdin), so a 1 GB export costs no more to detect than a small one. The JSON
formats are told apart by the keys of their first item, read with ijson from
the prefix even when the prefix ends mid-file:

    list, first item has "mapping"                 chatgpt
    list, first item has "chat_messages"           claude
    list, first item has "haystack_sessions"       longmemeval
    list, first item has "sample_id"/"conversation" locomo
    list, first item has "role" or "messages", or is a list   openai
    object with "chats", or "messages" of {date, from}       telegram
    object with "messages" of {role, content}                 openai
    lines of {"speaker"/"timestamp", ...}                      jsonl (nemori's own)
    lines of {"role", "content"} with no "timestamp"           openai
    a zip, or text lines that start with a date and time       whatsapp

A first item without its decisive key but with others the format has (a
ChatGPT conversation with "current_node" but no "mapping") is given to that
format's reader, whose error then names the conversation and what it lacks.
An object per line that fits nothing is nemori's JSONL, the format that has
always been the default, so that its reader names the line that is wrong.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import PurePath

import ijson

from nemori_cli.domain import INPUT_FORMATS
from nemori_cli.errors import InputError
from nemori_cli.importers import whatsapp
from nemori_cli.importers.common import quote
from nemori_cli.importers.jsonstream import parse_events
from nemori_cli.importers.peek import BOM

PEEK = 1 << 18  # a LoCoMo sample's 'conversation' key comes after ~30 KB of questions; Telegram's 'chats' after the contacts
FORMATS = tuple(f for f in INPUT_FORMATS if f != "auto")  # what can be told from the first bytes (domain.py names them)

# The first item's keys: decisive ones first, then those that only point at a format.
_DECISIVE = (
    ("mapping", "chatgpt"),
    ("chat_messages", "claude"),
    ("haystack_sessions", "longmemeval"),
    ("sample_id", "locomo"),
    ("conversation", "locomo"),
    ("role", "openai"),
    ("messages", "openai"),
)
_HINTS = (
    ("current_node", "chatgpt"),
    ("conversation_id", "chatgpt"),
    ("default_model_slug", "chatgpt"),
    ("moderation_results", "chatgpt"),
    ("account", "claude"),
    ("uuid", "claude"),
    ("question_id", "longmemeval"),
    ("haystack_dates", "longmemeval"),
    ("haystack_session_ids", "longmemeval"),
    ("qa", "locomo"),
)
_TELEGRAM_KEYS = ("chats", "left_chats", "personal_information")
_TELEGRAM_MESSAGE_KEYS = ("date", "date_unixtime", "from", "from_id")
_BY_NAME = {".jsonl": "jsonl", ".ndjson": "jsonl", ".txt": "whatsapp", ".zip": "whatsapp"}


@dataclass
class _Shape:
    """What the prefix shows: the top-level kind, the first item's kind and keys, its first message's keys."""

    top: str | None = None
    item: str | None = None
    keys: list[str] = field(default_factory=list)
    message_keys: list[str] = field(default_factory=list)


def detect(head: bytes, name: str) -> str:
    """The format of an input that starts with ``head``; an InputError when it cannot be told."""
    if head.startswith(whatsapp.ZIP_MAGIC):
        return "whatsapp"
    text = head.removeprefix(BOM).lstrip(b" \t\r\n")
    if not text:
        return "jsonl"  # empty: the JSONL reader says so
    first_line = text.split(b"\n", 1)[0].rstrip(b"\r")
    if _whatsapp_line(first_line):
        return "whatsapp"  # before JSON: iOS lines start with "[" too
    if text[:1] == b"[":
        shape = _shape(text)
        found = _from_list(shape)
        seen = (
            f"a JSON list whose first item has the keys {', '.join(quote(k, 30) for k in shape.keys[:6])}" if shape.keys else "a JSON list"
        )
    elif text[:1] == b"{":
        found = _from_lines(first_line) or _from_object(_shape(text)) or "jsonl"
    else:
        found, seen = None, "text that is neither JSON nor a WhatsApp chat"
    found = found or _BY_NAME.get(PurePath(name).suffix.lower())
    if found is None:
        # "pass --format" only helps a file that is one of the formats; a CSV or a text file is none of them.
        if PurePath(name).suffix.lower() in (".csv", ".tsv"):
            fix = (
                "nemori reads no CSV or plain text as such: make it JSON Lines, one"
                ' {"speaker": ..., "content": ..., "timestamp": ...} a line (README, Input)'
            )
        else:
            fix = "if it is one of them, pass --format to say which; otherwise make it JSON Lines (README, Input)"
        raise InputError(f"{name}: cannot tell its format: it starts as {seen}, which none of {', '.join(FORMATS)} does; {fix}")
    return found


def _whatsapp_line(line: bytes) -> bool:
    try:
        return whatsapp.starts_message(line.decode("utf-8"))
    except UnicodeDecodeError:
        return False


def _from_lines(line: bytes) -> str | None:
    """A first line that is a whole JSON object: nemori's JSONL, OpenAI-style lines, or a one-line export."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    messages = value.get("messages")
    first = messages[0] if isinstance(messages, list) and messages and isinstance(messages[0], dict) else {}
    by_object = _from_object(_Shape("start_map", None, list(value), list(first)))
    if by_object:
        return by_object
    if "role" in value and "content" in value and "timestamp" not in value and "speaker" not in value:
        return "openai"
    return "jsonl"


def _from_list(shape: _Shape) -> str | None:
    if shape.item == "start_array":
        return "openai"  # a list of conversations, each a list of messages
    for table in (_DECISIVE, _HINTS):
        for key, fmt in table:
            if key in shape.keys:
                return fmt
    return None


def _from_object(shape: _Shape) -> str | None:
    if any(k in shape.keys for k in _TELEGRAM_KEYS):
        return "telegram"
    if "messages" in shape.keys:
        if "role" in shape.message_keys:
            return "openai"
        if any(k in shape.message_keys for k in _TELEGRAM_MESSAGE_KEYS) or "type" in shape.keys:
            return "telegram"
        return "openai"
    return None


def _shape(data: bytes) -> _Shape:
    """The prefix's shape, read until the first item ends, the prefix ends or a byte is wrong."""
    shape = _Shape()
    message = "messages.item"  # a Telegram chat's or an OpenAI conversation's first message
    try:
        for prefix, event, value in parse_events(io.BytesIO(data)):
            if shape.top is None:
                shape.top = event
                if event not in ("start_array", "start_map"):
                    break
                continue
            if shape.top == "start_array":
                if prefix == "item" and shape.item is None:
                    shape.item = event
                elif prefix == "item" and event == "map_key":
                    shape.keys.append(str(value))  # a map_key's value is the key, a str
                elif prefix == "item" and event in ("end_map", "end_array") or prefix == "" and event == "end_array":
                    break
            else:
                if prefix == "" and event == "map_key":
                    shape.keys.append(str(value))  # a map_key's value is the key, a str
                elif prefix == message and event == "map_key":
                    shape.message_keys.append(str(value))
                elif prefix == message and event == "end_map" or prefix == "" and event == "end_map":
                    break
    except (ijson.JSONError, ValueError, RecursionError, OverflowError):
        pass  # the prefix ends mid-file, or a byte is wrong: the reader will say where
    return shape
