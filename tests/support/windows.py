"""A retrieved window of raw turns, as the short road hands it to the reader: for prompt tests with a fake or real model."""

from __future__ import annotations

from datetime import datetime, timedelta

from nemori_cli.domain import Hit, Message


def window(speaker: str, lines: list[str], when: datetime, found: int = 1, similarity: float = 0.8) -> list[Hit]:
    """One hit: ``lines`` said a minute apart from ``when``, the turn at index ``found`` the one the search matched."""
    said = [
        Message(
            id=i, user="u", key=str(i), speaker=speaker, content=text, timestamp=when + timedelta(minutes=i), source_id=str(i), session="s"
        )
        for i, text in enumerate(lines, start=1)
    ]
    hit = said[found]
    return [
        Hit(kind="message", id=hit.id, score=0.05, title="", text=hit.content, start=said[0].timestamp, end=said[-1].timestamp, messages=tuple(said), similarity=similarity)
    ]  # fmt: skip
