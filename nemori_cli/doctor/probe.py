"""The pipeline probe: each stage's real code, once, on the bundled sample.

The stages are called through their public functions in the order ingest
runs them, against a throwaway SQLite file in a temporary directory (deleted
afterwards; the user's database is never opened). What each call cost and
how it ended is read afterwards from the LLM's CallLog, exactly as `stats`
reads it from a real ingest.

A stage that raises is recorded as crashed and the stages that need its
output are skipped; a stage that falls back (its own, counted, deterministic
replacement for an unusable answer) is not a crash.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nemori_cli import stages
from nemori_cli.doctor import sample
from nemori_cli.domain import CallRecord, EventRecord
from nemori_cli.embed.base import Embedder, identity, max_chars
from nemori_cli.errors import NemoriError
from nemori_cli.llm.base import StructuredLLM

# The stages the probe runs and reports, in the method's order; ingest runs all but the last.
STAGES = tuple(
    s.name
    for s in (
        stages.PARTITION,
        stages.NARRATION,
        stages.INTEGRATION,
        stages.PREDICTION,
        stages.DISTILLATION,
        stages.CONSOLIDATION,
        stages.ANSWER,
    )
)
INGEST_STAGES = STAGES[:-1]


@dataclass
class ProbeResult:
    calls: list[CallRecord] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    crashed: dict[str, str] = field(default_factory=dict)  # stage -> what was raised
    skipped: dict[str, str] = field(default_factory=dict)  # stage -> why it did not run
    ingest_seconds: float = 0.0  # wall time of the ingest stages, embedding and SQL included
    answer_seconds: float = 0.0
    answer: str | None = None


def run(llm: StructuredLLM, embedder: Embedder) -> ProbeResult:
    with tempfile.TemporaryDirectory(prefix="nemori-doctor-") as tmp:
        from nemori_cli.store.engines import parse_target

        db = parse_target(Path(tmp) / "probe.db").open()  # a SQLite file of its own, thrown away with the folder
        try:
            return _Probe(db, llm, embedder).run()
        finally:
            db.close()  # before the directory goes: an open file cannot be removed everywhere


class _Probe:
    def __init__(self, db, llm: StructuredLLM, embedder: Embedder):
        self.db, self.llm, self.embedder = db, llm, embedder
        self.result = ProbeResult()

    def run(self) -> ProbeResult:
        started = time.perf_counter()
        groups = self._stage(("partition",), self._partition)
        episodes = self._stage(("narration",), lambda: self._narrate(groups), needs=groups)
        self._stage(("integration",), self._integration_check)
        facts = self._stage(("prediction", "distillation"), lambda: self._distill(episodes), needs=episodes)
        self._stage(("consolidation",), lambda: self._consolidate(facts), needs=facts)
        answered = time.perf_counter()
        self.result.ingest_seconds = answered - started
        self.result.answer = self._stage(("answer",), self._answer, needs=episodes)
        self.result.answer_seconds = time.perf_counter() - answered
        self.result.calls, self.result.events = self.llm.log.drain()
        return self.result

    def _stage(self, names: tuple[str, ...], step: Callable[[], Any], needs: Any = True) -> Any:
        if needs is None:
            for name in names:
                self.result.skipped[name] = "an earlier stage crashed"
            return None
        try:
            return step()
        except Exception as e:  # the doctor reports a crash; it must not become one
            why = e.message if isinstance(e, NemoriError) else f"{type(e).__name__}: {e}"
            for name in names:
                self.result.crashed[name] = why
            return None

    def _partition(self):
        from nemori_cli.memory.profile import DEFAULT
        from nemori_cli.pipeline.partition import partition
        from nemori_cli.store import message_index
        from nemori_cli.store import messages as message_sql

        with self.db.transaction():
            self.db.bind_embedder(identity(self.embedder), self.embedder.dimensions)
            message_sql.insert_messages(self.db, sample.USER, sample.messages())
            # As ingest does for a new memory: ask reads raw turns.
            how = DEFAULT.turn_vectors
            message_index.index_all(self.db, sample.USER, self.embedder.embed_documents, max_chars(self.embedder), how=how)
        return partition(message_sql.pending(self.db, sample.USER), self.llm, self.embedder)

    def _narrate(self, groups) -> list[tuple[int, Any, Any, Any]]:
        """Each group narrated and stored as an episode: (id, draft, group, vector)."""
        from nemori_cli.pipeline.narrate import narrate
        from nemori_cli.store import episodes as episode_sql

        stored = []
        for group in groups:
            draft = narrate(group, self.llm)
            vector = self.embedder.embed_documents([f"{draft.title}\n{draft.narrative}"])[0]
            with self.db.transaction():
                episode_id = episode_sql.add(self.db, sample.USER, draft, vector)
            stored.append((episode_id, draft, group, vector))
        return stored

    def _integration_check(self) -> bool:
        from nemori_cli.pipeline.integrate import SelfCheck

        return SelfCheck(self.llm).passed()

    def _distill(self, episodes) -> list[tuple[str, Any, int]]:
        """New facts per episode, with one known fact seeded so that prediction is asked."""
        from nemori_cli.memory.semantic import SemanticSettings, distill
        from nemori_cli.store import facts as fact_sql

        first_id = episodes[0][0]
        with self.db.transaction():
            fact_sql.add(self.db, sample.USER, sample.KNOWN_FACT, self.embedder.embed_query(sample.KNOWN_FACT), [first_id])
        # Any similarity evokes: the probe measures the prediction call whatever
        # the embedder's similarity scale (an ingest evokes above the preset's tau).
        evoke_all = SemanticSettings(threshold=-1.0)
        found: list[tuple[str, Any, int]] = []
        for episode_id, draft, group, vector in episodes:
            texts = distill(self.db, sample.USER, self.llm, draft.title, list(group.messages), vector, evoke_all).facts
            found.extend((text, None, episode_id) for text in texts)
        if found:
            vectors = self.embedder.embed_documents([text for text, _, _ in found])
            found = [(text, v, episode_id) for (text, _, episode_id), v in zip(found, vectors)]
        return found

    def _consolidate(self, facts) -> int:
        """The self-check first (always asked, so it is always measured), then each fact as ingest does."""
        from nemori_cli.memory.consolidate import Consolidator, apply

        consolidator = Consolidator(self.llm)
        consolidator.trusted()
        for text, vector, episode_id in facts:
            with self.db.transaction():
                apply(self.db, sample.USER, consolidator.decide(self.db, sample.USER, text, vector), vector, episode_id)
        return len(facts)

    def _answer(self) -> str:
        from nemori_cli.retrieval.answer import ask

        answer, _ = ask(self.db, sample.USER, self.embedder, self.llm, sample.QUESTION, today=sample.TODAY)
        return answer.answer
