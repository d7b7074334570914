"""OpenAI-style message lists ([{"role", "content"}]) to IncomingMessages.

Accepted, each list of messages being one conversation:
- a JSON document: one list of messages, a list of such lists, a list of
  {"messages": [...]} objects, or one {"messages": [...]} object;
- JSON Lines: one list, or one {"messages": [...]} object, per line (the
  fine-tuning format); or one message per line, all one conversation.

``content`` is a string or a list of parts {type: "text", text}; an image,
audio or file part becomes a note ("[image]"). The speaker is the message's
``name`` when it has one, else its role. System and developer messages (the
prompt), tool and function messages (call results), and assistant messages
that only call tools are left out and counted, as are empty ones.

Times: a message's ``timestamp``, ``created_at`` or ``created`` (ISO 8601,
or seconds since 1970). A message without one gets --default-timestamp plus
its position in the file in seconds, so the order is kept; without either,
it is refused.

Ids: a conversation's ``id`` (or ``conversation_id``) when it has one, else
a hash of what its messages say, then ``:<position>``. The same file read
again adds nothing; a conversation without an id that grows is a new one, so
give it an id to append to it.
"""

from __future__ import annotations

import hashlib
import json
import typing
from collections.abc import Iterator
from datetime import datetime, timedelta

from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import InputError
from nemori_cli.importers.collect import Collector, Imported
from nemori_cli.importers.common import decode, from_epoch, kind, parse_iso, quote
from nemori_cli.importers.jsonstream import JsonStream
from nemori_cli.importers.peek import BOM, peek
from nemori_cli.importers.selection import Selection

FORMAT = "openai"
NAMESPACE = "openai:"
EXPECTED = 'expected OpenAI-style messages ([{"role", "content"}], one list per conversation)'
_LINE_PEEK = 1 << 20  # a first line this long is no JSON Lines line: read as one document
_TIME_FIELDS = ("timestamp", "created_at", "created")
_LEFT_OUT = {"system": "system", "developer": "system", "tool": "tool", "function": "tool"}
_NOTES = {
    "image_url": "[image]",
    "image": "[image]",
    "input_image": "[image]",
    "input_audio": "[audio]",
    "audio": "[audio]",
    "file": "[file]",
    "input_file": "[file]",
}


class _Conversation:
    def __init__(self, where: str, raw: list, ident: str | None = None, title: str | None = None):
        self.where, self.raw, self.ident, self.title = where, raw, ident, title
        self.first = 0  # messages before it in the file


def read(
    stream: typing.BinaryIO, source: str, selection: Selection = Selection(), *, default_timestamp: datetime | None = None
) -> Imported:
    out = Collector(source, FORMAT, "OpenAI-style", selection, NAMESPACE)
    position = 0  # messages before this one in the file: the default time's offset
    for conv in _conversations(stream, source):
        conv.first = position
        position += len(conv.raw)
        ident = conv.ident or "h" + _digest(conv.raw, conv.where)
        if out.wants(ident, conv.title):
            _messages(out, conv, ident, default_timestamp)
    return out.result()


def _digest(raw: list, where: str) -> str:
    """What a conversation says, as an id: stable across reads of the same file."""
    try:
        body = json.dumps(raw, sort_keys=True, ensure_ascii=True, default=str)
    except (RecursionError, ValueError):
        raise InputError(f"{where}: nested too deeply to read; {EXPECTED}") from None
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _conversations(stream: typing.BinaryIO, source: str) -> Iterator[_Conversation]:
    head, stream = peek(stream, _LINE_PEEK)
    first_line = head.removeprefix(BOM).lstrip(b" \t\r\n").split(b"\n", 1)
    if len(first_line) == 2 or len(head) < _LINE_PEEK:
        try:
            json.loads(first_line[0])
        except (ValueError, RecursionError):
            pass  # a pretty-printed document: its first line is no value
        else:
            yield from _lines(stream, source)
            return
    yield from _document(stream, source)


def _lines(stream: typing.BinaryIO, source: str) -> Iterator[_Conversation]:
    """JSON Lines: a conversation per line, or (lines that are messages) one conversation of all of them."""
    singles: list = []
    conversations = 0
    for lineno, raw in enumerate(stream, 1):
        where = f"{source}:{lineno}"
        if lineno == 1 and raw.startswith(BOM):
            raw = raw[len(BOM) :]
        text = decode(raw.rstrip(b"\r\n"), source, lineno)
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as e:
            reason = e.msg if isinstance(e, json.JSONDecodeError) else "unreadable"
            raise InputError(f"{where}: not valid JSON ({reason}); {EXPECTED}") from None
        if isinstance(value, dict) and "role" in value:
            if conversations:
                raise InputError(f"{where}: a single message after lines that were conversations; expected one or the other")
            singles.append(value)
            continue
        if singles:
            raise InputError(f"{where}: a conversation after lines that were single messages; expected one or the other")
        # A line holding a list of conversations is the JSON document's form written on one line.
        many = isinstance(value, list) and value and all(isinstance(v, list) or isinstance(v, dict) and "messages" in v for v in value)
        for item in value if many else [value]:
            conversations += 1
            yield _conversation(item, where)
    if singles:
        yield _Conversation(f"{source}:", singles)


def _document(stream: typing.BinaryIO, source: str) -> Iterator[_Conversation]:
    """One JSON document, streamed: a long list of messages is never built whole twice."""
    doc = JsonStream(stream, source, EXPECTED)
    try:
        prefix, event, value = next(doc)
    except StopIteration:
        raise InputError(f"{source}: empty input; {EXPECTED}") from None
    if event == "start_map":
        whole = doc.build(event, value)
        for _ in doc:  # trailing garbage is refused when read
            pass
        yield _conversation(whole, source)
        return
    if event != "start_array":
        raise InputError(f"{source}: the top level is {event.replace('_', ' ')}; {EXPECTED}")
    singles: list = []
    for index, (prefix, event, value) in enumerate(doc):
        if prefix == "" and event == "end_array":
            break
        doc.at = f"item {index}"
        item = doc.build(event, value)
        where = f"{source}: item {index}"
        if isinstance(item, dict) and "role" in item:
            singles.append(item)
        elif singles:
            raise InputError(f"{where}: {kind(item)} after items that were messages; expected a list of messages or of conversations")
        else:
            yield _conversation(item, where)
    for _ in doc:
        pass
    if singles:
        yield _Conversation(f"{source}:", singles)


def _conversation(value: object, where: str) -> _Conversation:
    if isinstance(value, list):
        return _Conversation(where, value)
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        ident = value.get("id", value.get("conversation_id"))
        ident = str(ident) if isinstance(ident, (str, int)) and not isinstance(ident, bool) and str(ident).strip() else None
        title = value.get("title", value.get("name"))
        return _Conversation(where, value["messages"], ident, title if isinstance(title, str) else None)
    raise InputError(f"{where}: {kind(value)} with no 'messages' list; {EXPECTED}")


def _messages(out: Collector, conv: _Conversation, ident: str, default: datetime | None) -> None:
    for n, msg in enumerate(conv.raw):
        at = f"{conv.where} message {n}"
        if not isinstance(msg, dict):
            raise InputError(f'{at}: {kind(msg)}, not an object; expected {{"role", "content"}}')
        role = msg.get("role")
        if not isinstance(role, str) or not role.strip():
            raise InputError(f"{at}: 'role' is {quote(role)}; expected user, assistant, system or tool")
        timestamp = _time(msg, at, default, conv.first + n)
        if role in _LEFT_OUT:
            out.skip(_LEFT_OUT[role])
            continue
        text = _content(msg.get("content"), at)
        if not text.strip():
            out.skip("tool" if msg.get("tool_calls") or msg.get("function_call") else "empty")
            continue
        name = msg.get("name")
        speaker = name if isinstance(name, str) and name.strip() else role
        out.add(IncomingMessage(speaker, text, timestamp, source_id=f"{ident}:{n}", session=ident), at)


def _time(msg: dict, where: str, default: datetime | None, position: int) -> datetime:
    for field in _TIME_FIELDS:
        value = msg.get(field)
        if value is None:
            continue
        try:
            return parse_iso(value) if isinstance(value, str) and not value.strip().isdigit() else from_epoch(value)
        except ValueError:
            raise InputError(f"{where}: '{field}' is {quote(value)}; expected an ISO 8601 time or seconds since 1970") from None
    if default is None:
        raise InputError(f"{where}: no time ('timestamp', 'created_at' or 'created'); pass --default-timestamp to date the messages")
    try:
        return default + timedelta(seconds=position)
    except OverflowError:
        raise InputError(f"{where}: --default-timestamp plus {position} seconds is past the year 9999") from None


def _content(content: object, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InputError(f"{where}: 'content' is {kind(content)}; expected a string or a list of parts")
    pieces = []
    for j, part in enumerate(content):
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        elif isinstance(part, dict):
            ptype = part.get("type")
            pieces.append(_NOTES.get(ptype, "[attachment]") if isinstance(ptype, str) else "[attachment]")
        else:
            raise InputError(f'{where}: content part {j} is {kind(part)}; expected {{"type": "text", "text"}}')
    return "\n".join(p for p in pieces if p)
