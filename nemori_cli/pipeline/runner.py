"""The persisted pipeline: store messages, then turn the pending buffer into episodes.

Resumability comes from the database, not from memory: a message is pending
until the transaction that writes its episode commits. Each window's episodes,
their indexes, the messages' ownership and the window's LLM call log are one
transaction, so Ctrl-C or a crash at any point leaves either the whole window
done or none of it, and the next run picks up the same pending messages.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from nemori_cli.domain import IncomingMessage
from nemori_cli.embed.base import Embedder, identity
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.pipeline.narrate import narrate
from nemori_cli.pipeline.partition import Group, PartitionSettings, partition
from nemori_cli.pipeline.semantic import SemanticSettings, distill_facts
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import messages as message_sql
from nemori_cli.store import telemetry
from nemori_cli.store.db import Database

Progress = Callable[[int, int], None]  # (messages done, messages to do)


@dataclass
class IngestReport:
    read: int = 0
    added: int = 0
    episodes: int = 0
    facts: int = 0
    windows: int = 0
    pending: int = 0
    seconds: float = 0.0


class Pipeline:
    def __init__(
        self,
        db: Database,
        user: str,
        llm: StructuredLLM,
        embedder: Embedder,
        *,
        window: int = 20,
        partition_settings: PartitionSettings = PartitionSettings(),
        semantic: SemanticSettings | None = SemanticSettings(),
    ):
        if window < 2:
            raise ValueError("window must be at least 2")
        self.db, self.user, self.llm, self.embedder = db, user, llm, embedder
        self.window = window
        self.partition_settings = partition_settings
        self.semantic = semantic  # None: episodic memory only

    def store(self, incoming: list[IncomingMessage], namespace: str = "") -> int:
        """Store new messages (all or none); returns how many were new."""
        with self.db.transaction():
            self.db.bind_embedder(identity(self.embedder), self.embedder.dimensions)
            return message_sql.insert_messages(self.db, self.user, incoming, namespace)

    def process(self, *, flush: bool, progress: Progress | None = None) -> IngestReport:
        """Turn pending messages into episodes, window by window.

        Without ``flush``, a tail shorter than the window waits for more
        messages; the last group of a full window also waits, because the
        conversation it belongs to may go on in the next messages.
        """
        report = IngestReport()
        started = time.perf_counter()
        total = message_sql.count_pending(self.db, self.user)
        done = 0
        if progress:
            progress(0, total)
        while True:
            window = message_sql.pending(self.db, self.user, limit=self.window)
            full = len(window) >= self.window
            if not window or (not full and not flush):
                break
            more_after = message_sql.count_pending(self.db, self.user) > len(window)
            groups = partition(window, self.llm, self.embedder, self.partition_settings)
            if len(groups) > 1 and (more_after or not flush):
                groups = groups[:-1]  # carried into the next window
            episodes, facts = self._write(groups)
            report.episodes += episodes
            report.facts += facts
            report.windows += 1
            done += sum(len(g.messages) for g in groups)
            if progress:
                progress(done, total)
        report.pending = message_sql.count_pending(self.db, self.user)
        if report.windows:
            self.db.checkpoint()
        report.seconds = time.perf_counter() - started
        return report

    def _write(self, groups: list[Group]) -> tuple[int, int]:
        """Episodes (and their facts) of one window, in one transaction. Model calls run by stage."""
        drafts = [narrate(g, self.llm) for g in groups]
        vectors = self.embedder.embed_documents([f"{d.title}\n{d.narrative}" for d in drafts])
        facts_per_draft: list[list[str]] = [[] for _ in drafts]
        if self.semantic is not None:
            facts_per_draft = [
                distill_facts(self.db, self.user, self.llm, d.title, list(g.messages), v, self.semantic)
                for d, g, v in zip(drafts, groups, vectors)
            ]
        all_facts = [f for fs in facts_per_draft for f in fs]
        fact_vectors = iter(self.embedder.embed_documents(all_facts)) if all_facts else iter(())
        with self.db.transaction():
            ids = [m.id for g in groups for m in g.messages]
            if not _still_pending(self.db, self.user, ids):
                return 0, 0  # another process took this window meanwhile; nothing to add
            for draft, vector, facts in zip(drafts, vectors, facts_per_draft):
                episode_id = episode_sql.add(self.db, self.user, draft, vector)
                for fact in facts:
                    fact_sql.add(self.db, self.user, fact, next(fact_vectors), [episode_id])
            calls, events = self.llm.log.drain()
            telemetry.write(self.db, self.user, calls, events)
        return len(drafts), len(all_facts)


def _still_pending(db: Database, user: str, ids: list[int]) -> bool:
    marks = ",".join("?" * len(ids))
    row = db.one(
        f"SELECT count(*) AS n FROM messages WHERE user_id = ? AND episode_id IS NULL AND id IN ({marks})",
        (user, *ids),
    )
    return bool(row) and row["n"] == len(ids)

