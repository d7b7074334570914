"""Management mode `summary`: one running summary, rewritten as each episode arrives.

Every version is kept (a row each), so the summary's history can be read and
a bad rewrite is never the only copy. When the model's answer is unusable,
the episode's title is appended as a dated line instead (counted), and the
oldest lines go first if that grows past the limit.
"""

from __future__ import annotations

from nemori_cli import stages
from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.dates import format_date
from nemori_cli.prompts import summary as prompt
from nemori_cli.store.db import Database, now_iso
from nemori_cli.store.episodes import EpisodeDraft

STAGE = stages.SUMMARY


def current(db: Database, user: str) -> tuple[int, str] | None:
    """(version id, text) of the latest summary, or None before the first episode."""
    row = db.one("SELECT id, text FROM summaries WHERE user_id = ? ORDER BY id DESC LIMIT 1", (user,))
    return (int(row["id"]), row["text"]) if row else None


def fold_in(db: Database, user: str, llm: StructuredLLM, draft: EpisodeDraft, episode_id: int) -> None:
    """Rewrite the summary to cover one more episode and store it as a new version (caller holds the transaction)."""
    latest = current(db, user)
    before = latest[1] if latest else None
    try:
        text = llm.complete(prompt.render(before, draft.title, draft.narrative, draft.start), schema=prompt.Summary, stage=STAGE).value.summary
    except LLMOutputError as e:
        llm.log.fallback(STAGE, f"{e.message}; appended the episode's title")
        lines = (before.splitlines() if before else []) + [f"{format_date(draft.start.date())}: {draft.title}"]
        while len("\n".join(lines)) > prompt.SUMMARY_MAX and len(lines) > 1:
            lines.pop(0)
        text = "\n".join(lines)
    db.conn.execute("INSERT INTO summaries(user_id, text, episode_id, created_at) VALUES (?, ?, ?, ?)", (user, text, episode_id, now_iso()))
