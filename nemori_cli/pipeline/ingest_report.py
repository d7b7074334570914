"""What an ingest or build run reports: its counts as it ends, and its progress as it goes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Progress = Callable[[int, int], None]  # (messages done, messages to do)


@dataclass
class IngestReport:
    read: int = 0
    added: int = 0
    changed: int = 0  # already stored under their id saying something else; the stored text was kept
    episodes: int = 0
    facts: int = 0
    notes: int = 0  # A-MEM notes made (--memory amem / nemori+amem)
    merged: int = 0  # episodes that continued an earlier one
    windows: int = 0
    pending: int = 0
    seconds: float = 0.0
    tokens_used: int = 0  # prompt + output tokens of the LLM calls this run wrote
    stopped_by_budget: bool = False  # max_tokens was reached with work left; a rerun resumes
    llm_calls: int = 0  # LLM calls this run wrote
    llm_failed: int = 0  # of them, those with no usable answer after every attempt
    fallbacks: int = 0  # steps that fell back deterministically (after a failed call, or a failed self-check)
    # Another process was building this memory (it held the build lock, pipeline/lock.py): this run only
    # stored the messages, and that build makes their memory.
    left_to_running_build: bool = False

    def add(self, later: IngestReport) -> None:
        """Count a later round of the same run in (its pending count and budget state are the newer)."""
        for name in ("episodes", "facts", "notes", "merged", "windows", "seconds", "tokens_used", "llm_calls", "llm_failed", "fallbacks"):
            setattr(self, name, getattr(self, name) + getattr(later, name))
        self.pending, self.stopped_by_budget = later.pending, later.stopped_by_budget
