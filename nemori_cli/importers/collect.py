"""What a reader hands back (``Imported``) and the collector every export reader fills it with.

The collector does, once for all formats, what each would otherwise repeat:
it applies the selection, counts what was left out and why, refuses a
message id seen twice (the store would keep only the first, silently) and
turns "nothing read" into one line that says what was there instead.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import InputError
from nemori_cli.importers.common import quote, valid_text
from nemori_cli.importers.selection import Selection

OUT_OF_DATES = "outside --since/--until"
# A message this long (1 MB of ASCII) is named on stderr as it is read: it is stored whole and every word of it
# is searchable, but its vector and the model read only its beginning, which the user should hear before a
# long paste is taken for a conversation. Such a message is kept, not refused: one pasted log in an export
# should not stop the import of the rest (issue 42, defect 15).
LARGE_CHARS = 1_000_000
_LISTED = 8  # titles named when --conversation matches none


@dataclass
class Imported:
    """Messages read from one input, and what the CLI reports about the reading."""

    messages: list[IncomingMessage]
    namespace: str  # the id namespace for add_messages, e.g. "chatgpt:"
    format: str
    left_out: dict[str, int] = field(default_factory=dict)  # reason -> messages, e.g. {"system": 3}

    @property
    def conversations(self) -> int:
        """Distinct conversations among the messages read (their session; JSONL without one counts as one)."""
        return len({m.session for m in self.messages})

    def left_out_line(self) -> str | None:
        """'left out 12 messages: 8 system, 3 tool, 1 hidden', or None when nothing was."""
        total = sum(self.left_out.values())
        if not total:
            return None
        parts = ", ".join(f"{n} {reason}" for reason, n in sorted(self.left_out.items(), key=lambda kv: (-kv[1], kv[0])))
        return f"left out {total} message{'s' if total != 1 else ''}: {parts}"

    def large_line(self) -> str | None:
        """'message 'm12' (line 1) is 50.0 MB; ...' for the largest message over LARGE_CHARS, or None."""
        large = [m for m in self.messages if len(m.content) > LARGE_CHARS]
        if not large:
            return None
        big = max(large, key=lambda m: len(m.content))
        name = f"message {quote(big.source_id, 40)}" if big.source_id else "a message"
        where = f" (line {big.line})" if big.line else ""
        mb = len(big.content.encode("utf-8", "surrogatepass")) / 1e6
        more = f", and {len(large) - 1} more over {LARGE_CHARS / 1e6:.0f} MB" if len(large) > 1 else ""
        return (
            f"{name}{where} is {mb:.1f} MB{more}; stored whole and searchable by every word, but its search vector"
            " and the model read only its beginning (the first few thousand and 400 characters)"
        )


class Collector:
    """Messages kept in reading order; a reader calls ``wants`` per conversation, ``skip`` or ``add`` per message."""

    def __init__(self, source: str, fmt: str, label: str, selection: Selection, namespace: str):
        self.source, self.format, self.label = source, fmt, label
        self.selection, self.namespace = selection, namespace
        self.messages: list[IncomingMessage] = []
        self.left_out: Counter[str] = Counter()
        self._ids: set[str] = set()
        self._matched: set[str] = set()
        self._seen_titles: list[str] = []
        self._conversations = 0

    def wants(self, ident: str | None, title: str | None) -> bool:
        """Whether to read this conversation; remembered for the error when --conversation matches none."""
        self._conversations += 1
        if len(self._seen_titles) < _LISTED:
            shown = title if title and title.strip() else ident
            if shown is not None:
                self._seen_titles.append(shown)
        hits = [w for w in self.selection.conversations if self.selection.matches(w, ident, title)]
        self._matched.update(hits)
        return not self.selection.conversations or bool(hits)

    def skip(self, reason: str, n: int = 1) -> None:
        self.left_out[reason] += n

    def add(self, msg: IncomingMessage, where: str) -> None:
        valid_text(msg.speaker, where, "speaker")
        valid_text(msg.content, where, "text")
        if msg.session is not None:
            valid_text(msg.session, where, "conversation id")
        if msg.source_id is not None:
            valid_text(msg.source_id, where, "id")
            if msg.source_id in self._ids:
                raise InputError(
                    f"{where}: message id {quote(msg.source_id)} appears a second time; expected each message once in one export"
                )
            self._ids.add(msg.source_id)
        if not self.selection.within(msg.timestamp):
            self.skip(OUT_OF_DATES)
            return
        self.messages.append(msg)

    def result(self) -> Imported:
        missing = [w for w in self.selection.conversations if w not in self._matched]
        if missing:
            listed = ", ".join(quote(t, 50) for t in self._seen_titles)
            more = self._conversations - len(self._seen_titles)
            available = f"available: {listed}" + (f" and {more} more" if more > 0 else "") if listed else "it holds none"
            raise InputError(
                f"{self.source}: no {self.label} conversation has the id or title {quote(missing[0])}"
                f" (an id exactly, a title in any case); {available}"
            )
        imported = Imported(self.messages, self.namespace, self.format, dict(self.left_out))
        if not self.messages:
            dates = self.selection.describe_dates()
            why = imported.left_out_line()
            if self._conversations == 0:
                raise InputError(f"{self.source}: no conversations; expected a {self.label} export holding some")
            raise InputError(
                f"{self.source}: no messages to read"
                + (f" {dates}" if dates and self.left_out.get(OUT_OF_DATES) else "")
                + (f" ({why})" if why else " (the conversations are empty)")
            )
        return imported
