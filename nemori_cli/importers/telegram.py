"""Telegram Desktop's JSON export (`result.json`) to IncomingMessages.

Two shapes: one chat {name, type, id, messages: [...]}, or the whole account
{..., chats: {list: [chat, ...]}, left_chats: {list: [...]}}. A chat can hold
hundreds of thousands of messages, so they are read one message at a time
from the stream, never a chat at once. Telegram writes a chat's name, type
and id before its messages; the choice of --conversation is made with what
has been read when the first message comes.

A message is {id, type, date, date_unixtime, from, text, ...}. Service
messages (joins, pins, calls, title changes) are left out and counted.
``date_unixtime`` (UTC) is preferred over ``date`` (local time, no zone).
``text`` is a string or a list of strings and entities {type, text}; the
entities' text is kept, in place. A photo, file or other media becomes a note
("[photo]", "[voice message]", "[file: report.pdf]") before the caption.

Ids are ``<chat id>:<message id>`` (message ids count per chat); the session
is the chat id.
"""

from __future__ import annotations

import typing
from datetime import datetime

from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import InputError
from nemori_cli.importers.collect import Collector, Imported
from nemori_cli.importers.common import from_epoch, kind, parse_iso, quote
from nemori_cli.importers.jsonstream import JsonStream
from nemori_cli.importers.selection import Selection

FORMAT = "telegram"
NAMESPACE = "telegram:"
EXPECTED = "expected a Telegram Desktop export (result.json: a chat with 'messages', or 'chats': {'list': [...]})"
# Where chats sit: the file itself (one chat), or the items of these lists (the whole account).
_CHAT_LISTS = ("chats.list.item", "left_chats.list.item")
_MEDIA = {
    "sticker": "sticker",
    "voice_message": "voice message",
    "video_message": "video message",
    "video_file": "video",
    "animation": "gif",
    "audio_file": "audio",
}


class _Chat:
    def __init__(self, prefix: str, index: int):
        self.prefix, self.index = prefix, index
        dot = f"{prefix}." if prefix else ""
        self.messages_prefix = f"{dot}messages.item"
        self.meta_keys = {f"{dot}{key}": key for key in ("name", "type", "id")}
        self.meta: dict[str, object] = {}
        self.chosen: bool | None = None  # decided at its first message
        self.key = ""
        self.count = 0


def read(stream: typing.BinaryIO, source: str, selection: Selection = Selection()) -> Imported:
    out = Collector(source, FORMAT, "Telegram", selection, NAMESPACE)
    json = JsonStream(stream, source, EXPECTED)
    json.top("start_map")
    chat, chats, found = _Chat("", 0), 0, False
    for prefix, event, value in json:
        if event == "start_map" and prefix in _CHAT_LISTS:
            chat = _Chat(prefix, chats)
            chats += 1
            json.at = f"chat {chat.index}"
        elif event == "map_key" and value == "messages" and prefix == chat.prefix:
            found = True
        elif prefix == chat.messages_prefix and event not in ("start_array", "end_array"):
            if chat.chosen is None:
                _choose(out, chat)
            json.at = f"chat {quote(chat.key, 40)} message {chat.count}"
            chat.count += 1
            message = json.build(event, value)
            if chat.chosen:
                _message(out, chat, message, source)
        elif prefix in chat.meta_keys and event in ("string", "number"):
            chat.meta[chat.meta_keys[prefix]] = value
    if not found:
        raise InputError(f"{source}: no 'messages' and no 'chats'; {EXPECTED}")
    return out.result()


def _choose(out: Collector, chat: _Chat) -> None:
    ident, name = chat.meta.get("id"), chat.meta.get("name")
    ident_text = None if ident is None or isinstance(ident, bool) else str(ident)
    title = name if isinstance(name, str) else None
    chat.key = ident_text or title or f"chat-{chat.index}"
    chat.chosen = out.wants(ident_text, title)


def _message(out: Collector, chat: _Chat, msg: object, source: str) -> None:
    where = f"{source}: chat {quote(chat.key, 40)}"
    if not isinstance(msg, dict):
        raise InputError(f"{where}: a message is {kind(msg)}, not an object; expected {{id, type, date, from, text}}")
    msg_id = msg.get("id")
    if isinstance(msg_id, bool) or not isinstance(msg_id, (int, str)) or not str(msg_id).strip():
        raise InputError(f"{where}: a message's 'id' is {quote(msg_id)}; expected a number")
    where = f"{where} message {quote(msg_id)}"
    if msg.get("type") != "message":
        out.skip("service" if msg.get("type") == "service" else "other type")
        return
    timestamp = _time(msg, where)
    text = _flatten(msg.get("text", ""), where)
    note = _note(msg)
    content = "\n".join(part for part in (note, text) if part)
    if not content.strip():
        out.skip("empty")
        return
    sender = msg.get("from")
    speaker = sender if isinstance(sender, str) and sender.strip() else str(msg.get("from_id") or "unknown")
    out.add(IncomingMessage(speaker, content, timestamp, source_id=f"{chat.key}:{msg_id}", session=chat.key), where)


def _time(msg: dict, where: str) -> datetime:
    unix = msg.get("date_unixtime")
    if unix is not None:
        try:
            return from_epoch(unix)
        except ValueError:
            raise InputError(f"{where}: 'date_unixtime' is {quote(unix)}; expected seconds since 1970 as a string") from None
    date = msg.get("date")
    try:
        if not isinstance(date, str):
            raise ValueError
        return parse_iso(date)  # local time, no zone: stays naive
    except ValueError:
        raise InputError(f"{where}: 'date' is {quote(date)} and no 'date_unixtime'; expected a time like 2023-12-31T21:41:05") from None


def _flatten(text: object, where: str) -> str:
    """A string, or a list of strings and entities {type, text}: their text in order."""
    if isinstance(text, str):
        return text
    if not isinstance(text, list):
        raise InputError(f"{where}: 'text' is {kind(text)}; expected a string or a list of strings and entities")
    pieces = []
    for part in text:
        if isinstance(part, str):
            pieces.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        else:
            raise InputError(f"{where}: a part of 'text' is {kind(part)}; expected a string or an entity {{type, text}}")
    return "".join(pieces)


def _note(msg: dict) -> str:
    """What a message carries besides words, as a short note; '' for none."""
    if "photo" in msg:
        return "[photo]"
    media = msg.get("media_type")
    if isinstance(media, str) and media in _MEDIA:
        emoji = msg.get("sticker_emoji")
        return f"[sticker {emoji}]" if media == "sticker" and isinstance(emoji, str) and emoji else f"[{_MEDIA[media]}]"
    if "file" in msg:
        name = msg.get("file_name")
        return f"[file: {name}]" if isinstance(name, str) and name else "[file]"
    poll = msg.get("poll")
    if isinstance(poll, dict):
        question = poll.get("question")
        return f"[poll: {question}]" if isinstance(question, str) and question else "[poll]"
    if "location_information" in msg:
        return "[location]"
    if "contact_information" in msg:
        return "[contact]"
    return ""
