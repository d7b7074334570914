"""ChatGPT's data export (`conversations.json`) to IncomingMessages.

The file is a JSON list of conversations. Each holds its messages as a tree,
``mapping`` {node id: {parent, children, message}}, because a regenerated
answer or an edited question starts a new branch. Only the branch the user
ended on is read: from ``current_node`` up through the parents, then
reversed. The other branches are answers the user threw away.

Left out, and counted by reason: system messages (custom instructions,
the model's preamble), tool messages (browsing results, code output, plugin
answers, and the assistant's calls to tools: messages with a ``recipient``
other than "all"), messages ChatGPT hides from the conversation
(``metadata.is_visually_hidden_from_conversation``), and empty ones. The
answer the assistant gives after using a tool says what the tool found.

Kept: what the user and the assistant wrote. A part that is not text
becomes a short note ("[image]", "[audio]", "[file]"); code or a quotation
shown in the conversation is kept as the text it is. A message without ``create_time`` gets the time of
the message before it, or else the conversation's. Times are UTC.

Ids: each message is ``<conversation id>:<node id>``, and its session is the
conversation id, so re-importing an export (or a later export of the same
account) adds only what is new.
"""

from __future__ import annotations

import typing
from datetime import datetime

from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import InputError
from nemori_cli.importers.collect import Collector, Imported
from nemori_cli.importers.common import from_epoch, kind, quote
from nemori_cli.importers.conversations import read_conversations
from nemori_cli.importers.selection import Selection

FORMAT = "chatgpt"
NAMESPACE = "chatgpt:"
EXPECTED = "expected a ChatGPT export (conversations.json: a JSON list of conversations)"
_NODE = "expected {id, parent, children, message} as ChatGPT writes a node"

# Parts that are files, by the content_type ChatGPT gives them.
_NOTES = {
    "image_asset_pointer": "[image]",
    "audio_asset_pointer": "[audio]",
    "real_time_user_audio_video_asset_pointer": "[audio]",
    "video_container_asset_pointer": "[video]",
}
# Content types whose words are in 'text' (the code the assistant ran, a quoted page).
_TEXT_TYPES = ("code", "execution_output", "tether_quote", "computer_output", "system_error")


def read(stream: typing.BinaryIO, source: str, selection: Selection = Selection()) -> Imported:
    return read_conversations(
        stream, source, selection, fmt=FORMAT, label="ChatGPT", namespace=NAMESPACE, expected=EXPECTED, conversation=_conversation
    )


def _conversation(out: Collector, conv: object, where: str) -> None:
    if not isinstance(conv, dict):
        raise InputError(f"{where}: {kind(conv)}, not an object; expected a conversation with 'mapping'")
    ident = conv.get("conversation_id", conv.get("id"))
    if not isinstance(ident, str) or not ident.strip():
        raise InputError(f"{where}: no 'id' or 'conversation_id' (a string); expected a ChatGPT conversation")
    where = f"{where} ({quote(ident, 50)})"
    title = conv.get("title") if isinstance(conv.get("title"), str) else None
    if not out.wants(ident, title):
        return
    mapping = conv.get("mapping")
    if not isinstance(mapping, dict):
        what = "no 'mapping'" if mapping is None else f"'mapping' is {kind(mapping)}"
        raise InputError(f"{where}: {what}; expected {{node id: node}} holding the conversation's messages")
    fallback = _time(conv.get("create_time"), where, "create_time") or _time(conv.get("update_time"), where, "update_time")
    previous: datetime | None = None
    for node_id, node in _branch(mapping, conv.get("current_node"), where):
        at = f"{where} node {quote(node_id, 50)}"
        message = node.get("message")
        if message is None:  # the root, and the placeholders a deleted message leaves
            continue
        if not isinstance(message, dict):
            raise InputError(f"{at}: 'message' is {kind(message)}; expected an object with author and content")
        stamp = _time(message.get("create_time"), at, "create_time")
        previous = stamp or previous or fallback
        reason = _left_out(message)
        if reason:
            out.skip(reason)
            continue
        text = _text(message.get("content"), at)
        if text is None or not text.strip():
            out.skip("empty")
            continue
        if previous is None:
            raise InputError(f"{at}: no 'create_time' here, before it or on the conversation; expected epoch seconds")
        author = message.get("author") or {}
        name = author.get("name")
        speaker = name if isinstance(name, str) and name.strip() else author["role"]
        out.add(IncomingMessage(speaker, text, previous, source_id=f"{ident}:{node_id}", session=ident), at)


def _branch(mapping: dict, current: object, where: str) -> list[tuple[str, dict]]:
    """The nodes from the root to ``current``, in order; refuses a missing parent or a loop."""
    if current is None:
        current = _last_leaf(mapping)
        if current is None:
            return []
    if not isinstance(current, str) or current not in mapping:
        raise InputError(f"{where}: 'current_node' {quote(current)} is not a node in 'mapping'; expected the id of the last message")
    chain: list[tuple[str, dict]] = []
    seen: set[str] = set()
    node_id: object = current  # a node's 'parent' is whatever the file holds: checked below
    child: str | None = None
    while node_id is not None:
        if not isinstance(node_id, str):
            raise InputError(f"{where} node {quote(child, 50)}: 'parent' is {kind(node_id)}; expected a node id or null")
        if node_id in seen:
            raise InputError(f"{where} node {quote(node_id, 50)}: its parents lead back to it; expected a tree of nodes")
        node = mapping.get(node_id)
        if node is None:
            raise InputError(f"{where} node {quote(child, 50)}: its parent {quote(node_id, 50)} is not in 'mapping'; {_NODE}")
        if not isinstance(node, dict):
            raise InputError(f"{where} node {quote(node_id, 50)}: {kind(node)}, not an object; {_NODE}")
        seen.add(node_id)
        chain.append((node_id, node))
        node_id, child = node.get("parent"), node_id
    chain.reverse()
    return chain


def _last_leaf(mapping: dict) -> str | None:
    """Without 'current_node' (some older exports): the leaf written last, the branch most likely ended on."""
    best, best_time = None, float("-inf")
    for node_id, node in mapping.items():
        if not isinstance(node, dict) or node.get("children"):
            continue
        message = node.get("message")
        stamp = message.get("create_time") if isinstance(message, dict) else None
        try:
            moment = float(stamp) if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else float("-inf")
        except OverflowError:  # an integer past what a float holds: no time, as far as choosing goes
            moment = float("-inf")
        if best is None or moment >= best_time:
            best, best_time = node_id, moment
    return best


def _time(value: object, where: str, field: str) -> datetime | None:
    if value is None:
        return None
    try:
        return from_epoch(value)
    except ValueError as e:
        raise InputError(f"{where}: '{field}' is {quote(value)} ({e}); expected seconds since 1970 or null") from None


def _left_out(message: dict) -> str | None:
    """Why a message is not the user's or the assistant's words, or None when it is."""
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if role == "system":
        return "system"
    if role == "tool" or message.get("recipient", "all") not in ("all", None):
        return "tool"  # a tool's answer, or the assistant's call to one (a search, code to run)
    metadata = message.get("metadata")
    if isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation"):
        return "hidden"
    if role not in ("user", "assistant"):
        return "other role"
    return None


def _text(content: object, where: str) -> str | None:
    """The words of a message's content; notes for files; None when it holds nothing readable."""
    if not isinstance(content, dict):
        return None
    ctype = content.get("content_type")
    parts = content.get("parts")
    if ctype in _TEXT_TYPES and isinstance(content.get("text"), str):
        return content["text"]
    if isinstance(parts, list):
        return _parts(parts, where)
    if isinstance(content.get("text"), str):
        return content["text"]
    if isinstance(content.get("result"), str):  # tether_browsing_display
        return content["result"]
    return None


def _parts(parts: list, where: str) -> str:
    texts: list[str] = []
    notes: list[str] = []
    for i, part in enumerate(parts):
        if isinstance(part, str):
            if part:
                texts.append(part)
        elif isinstance(part, dict):
            if part.get("content_type") == "audio_transcription" and isinstance(part.get("text"), str):
                texts.append(part["text"])  # voice mode: the words said
            else:
                ctype = part.get("content_type")
                notes.append(_NOTES.get(ctype, "[file]") if isinstance(ctype, str) else "[file]")
        elif part is not None:
            raise InputError(f"{where}: content part {i} is {kind(part)}; expected text or an attachment object")
    if texts and "[audio]" in notes:
        notes = [n for n in notes if n != "[audio]"]  # the recording of words already transcribed
    return "\n".join(notes + texts)
