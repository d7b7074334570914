"""Claude's data export (`conversations.json`) to IncomingMessages.

The file is a JSON list of conversations {uuid, name, created_at,
chat_messages: [{uuid, sender, text, content, created_at, attachments,
files}]}. Messages are already in order, one branch only.

A message's words are its ``content`` blocks of type text (``text`` when
there are none: older exports). Tool calls and their results are left out of
the words; a message of nothing else is left out as "tool". Files and
attachments become a note with their name ("[attachment: notes.pdf]"): the
extracted text of a pasted document is the document, not what was said, and
would swamp the memory of the conversation. Empty messages, and senders
other than human and assistant, are left out and counted.

Speakers are "user" and "assistant", as in the ChatGPT reader, so that the
two exports of one person read alike. Ids are ``<conversation uuid>:<message
uuid>``; the session is the conversation's uuid.
"""

from __future__ import annotations

import typing
from datetime import datetime

from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import InputError
from nemori_cli.importers.collect import Collector, Imported
from nemori_cli.importers.common import kind, parse_iso, quote
from nemori_cli.importers.conversations import read_conversations
from nemori_cli.importers.selection import Selection

FORMAT = "claude"
NAMESPACE = "claude:"
EXPECTED = "expected a Claude export (conversations.json: a JSON list of conversations with chat_messages)"
_SPEAKERS = {"human": "user", "assistant": "assistant"}
_TOOL_BLOCKS = ("tool_use", "tool_result", "server_tool_use", "web_search_tool_result")


def read(stream: typing.BinaryIO, source: str, selection: Selection = Selection()) -> Imported:
    return read_conversations(
        stream, source, selection, fmt=FORMAT, label="Claude", namespace=NAMESPACE, expected=EXPECTED, conversation=_conversation
    )


def _conversation(out: Collector, conv: object, where: str) -> None:
    if not isinstance(conv, dict):
        raise InputError(f"{where}: {kind(conv)}, not an object; expected a conversation with 'chat_messages'")
    ident = conv.get("uuid")
    if not isinstance(ident, str) or not ident.strip():
        raise InputError(f"{where}: no 'uuid' (a string); expected a Claude conversation")
    where = f"{where} ({quote(ident, 50)})"
    title = conv.get("name") if isinstance(conv.get("name"), str) else None
    if not out.wants(ident, title):
        return
    messages = conv.get("chat_messages")
    if not isinstance(messages, list):
        what = "no 'chat_messages'" if messages is None else f"'chat_messages' is {kind(messages)}"
        raise InputError(f"{where}: {what}; expected a list of messages")
    previous = _time(conv.get("created_at"), where, "created_at")
    for i, message in enumerate(messages):
        at = f"{where} message {i}"
        if not isinstance(message, dict):
            raise InputError(f"{at}: {kind(message)}, not an object; expected {{uuid, sender, text, created_at}}")
        msg_id = message.get("uuid")
        if not isinstance(msg_id, str) or not msg_id.strip():
            raise InputError(f"{at}: no 'uuid' (a string); expected every message to have one")
        at = f"{where} message {i} ({quote(msg_id, 50)})"
        previous = _time(message.get("created_at"), at, "created_at") or previous
        sender = message.get("sender")
        speaker = _SPEAKERS.get(sender) if isinstance(sender, str) else None
        if speaker is None:
            out.skip("other role")
            continue
        text, tools_only = _text(message, at)
        if tools_only:
            out.skip("tool")
            continue
        if not text.strip():
            out.skip("empty")
            continue
        if previous is None:
            raise InputError(f"{at}: no 'created_at' here, before it or on the conversation; expected an ISO 8601 time")
        out.add(IncomingMessage(speaker, text, previous, source_id=f"{ident}:{msg_id}", session=ident), at)


def _time(value: object, where: str, field: str) -> datetime | None:
    if value is None:
        return None
    try:
        if not isinstance(value, str):
            raise ValueError
        return parse_iso(value)
    except ValueError:
        raise InputError(f"{where}: '{field}' is {quote(value)}; expected an ISO 8601 time like 2024-03-10T12:34:56Z") from None


def _text(message: dict, where: str) -> tuple[str, bool]:
    """The words and file notes; and whether the message holds tool blocks and nothing else."""
    texts: list[str] = []
    tools = 0
    content = message.get("content")
    if isinstance(content, list):
        for j, block in enumerate(content):
            if not isinstance(block, dict):
                raise InputError(f"{where}: content block {j} is {kind(block)}; expected {{type, text}}")
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                if block["text"]:
                    texts.append(block["text"])
            elif block.get("type") in _TOOL_BLOCKS:
                tools += 1
    if not texts and isinstance(message.get("text"), str) and message["text"]:
        texts.append(message["text"])
    notes = [
        f"[{label}: {item['file_name']}]" if isinstance(item, dict) and isinstance(item.get("file_name"), str) else f"[{label}]"
        for field, label in (("attachments", "attachment"), ("files", "file"))
        if isinstance(message.get(field), list)
        for item in message[field]
    ]
    if not texts and not notes and tools:
        return "", True
    return "\n\n".join(texts + notes), False
