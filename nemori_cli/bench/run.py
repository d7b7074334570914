"""Running a benchmark: for each conversation and system, build a fresh memory, then answer its questions.

The work is cut into units that are recorded as they finish (results.py):
a built memory (with what building it cost) and an answered question (with
its scores). Rerunning the same command skips every recorded unit; a Nemori
memory whose build was interrupted resumes from its own pending messages.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from nemori_cli.bench.results import ResultLog
from nemori_cli.bench.stores import FileStores, SchemaStores
from nemori_cli.bench.systems import Reply, Shared, System
from nemori_cli.domain import IncomingMessage
from nemori_cli.retrieval import answer_fixes
from nemori_cli.store import telemetry
from nemori_cli.store.contract import Store

USER = "bench"


@dataclass(frozen=True)
class Question:
    qid: str
    text: str
    gold: str
    evidence: tuple[str, ...]  # source ids of the turns that hold the answer
    today: str | None = None  # the date the question is asked on, when the benchmark gives one
    meta: dict = field(default_factory=dict)  # category, question type, abstention...


@dataclass
class Unit:
    """One conversation to remember and the questions asked about it."""

    key: str
    messages: list[IncomingMessage]
    questions: list[Question]


Scorer = Callable[[Question, Reply], dict]


@dataclass(frozen=True)
class Judge:
    """A named grader of answer records; its labels are records of their own, so a run can be judged later."""

    name: str
    grade: Callable[[dict], bool | None]


def judge_missing(log: ResultLog, benchmark: str, judge: Judge, on_done: Callable[[], None] | None = None) -> int:
    """Label every answer of ``benchmark`` that this judge has not labelled yet; returns how many it labelled."""
    done = {
        (r["unit"], r["system"], r["qid"])
        for r in log.of_kind("judgement")
        if r.get("judge") == judge.name and r.get("benchmark") == benchmark
    }
    count = 0
    for answer in log.of_kind("answer"):
        key = (answer["unit"], answer["system"], answer["qid"])
        if answer.get("benchmark") != benchmark or key in done:
            continue
        label = judge.grade(answer)
        log.append(
            {
                "kind": "judgement",
                "benchmark": benchmark,
                "unit": key[0],
                "system": key[1],
                "qid": key[2],
                "judge": judge.name,
                "label": label,
            }
        )
        done.add(key)
        count += 1
        if on_done:
            on_done()
    return count


class RunProgress(Protocol):
    """What a run reports as it goes; the interface draws it (cli/progress.py), the bench never does."""

    def set_total(self, questions: int) -> None:
        """The questions the whole run will answer (over every unit and system)."""

    def step(self, description: str, total: int | None) -> Callable[[int, int], None] | None:
        """A new step (a memory built, a system's questions); returns its (done, of) callback, or None."""

    def question_done(self) -> None:
        """One more question answered (or found already answered)."""


class Silent:
    """Progress that reports nothing (--quiet, or no terminal)."""

    def set_total(self, questions: int) -> None:
        pass

    def step(self, description: str, total: int | None) -> Callable[[int, int], None] | None:
        return None

    def question_done(self) -> None:
        pass


def _storage_record(storage) -> dict:
    return {"entries": storage.entries, "characters": storage.characters, "tokens": storage.tokens, **storage.detail}


class BenchRunner:
    def __init__(
        self,
        benchmark: str,
        log: ResultLog,
        shared: Shared,
        systems: list[System],
        scorer: Scorer,
        judge: Judge | None,
        progress: RunProgress,
        stores: FileStores | SchemaStores | None = None,
    ):
        self.benchmark, self.log, self.shared = benchmark, log, shared
        self.systems, self.scorer, self.judge, self.progress = systems, scorer, judge, progress
        self.stores = stores or FileStores(log.out)

    def run(self, units: list[Unit]) -> None:
        self.progress.set_total(sum(len(u.questions) for u in units) * len(self.systems))
        for unit in units:
            open_dbs: dict[str, Store] = {}
            try:
                for system in self.systems:
                    db = open_dbs.get(system.build_key)
                    if db is None:
                        db = open_dbs[system.build_key] = self._built(unit, system)
                    self._record_storage(unit, system, db)
                    self._answer_all(unit, system, db)
            finally:
                for db in open_dbs.values():
                    db.close()
            if self.judge:
                judge_missing(self.log, self.benchmark, self.judge)

    def _built(self, unit: Unit, system: System):
        key = system.build_key
        where = {"kind": "build", "benchmark": self.benchmark, "unit": unit.key, "build_key": key}
        exists = self.stores.exists(unit.key, key)
        if self.log.find(**where) and exists:
            return self.stores.open(unit.key, key)
        resumed = exists and getattr(system, "resumable", False)
        if exists and not resumed:
            self.stores.remove(unit.key, key)
        db = self.stores.open(unit.key, key)
        started = time.perf_counter()
        system.build(db, USER, unit.messages, self.shared, self.progress.step(f"{unit.key} {system.build_key}: memory", len(unit.messages)))
        seconds = time.perf_counter() - started
        storage = system.storage(db, USER, self.shared)
        db.checkpoint()
        self.log.append(
            {
                **where,
                "system": system.name,
                "messages": len(unit.messages),
                "seconds": round(seconds, 2),
                "resumed": resumed,
                "stages": telemetry.stage_stats(db, USER),
                "storage": _storage_record(storage),
                "db_bytes": self.stores.size_bytes(db, unit.key, key),
            }
        )
        return db

    def _record_storage(self, unit: Unit, system: System, db: Store) -> None:
        """What this system keeps of a memory, recorded per system.

        Systems that share a build (one memory) may keep different parts of it
        for answering (nemori+amem-notes reads the notes alone), so the build
        record's storage, counted by whichever system built it, is not theirs.
        """
        where = {"kind": "storage", "benchmark": self.benchmark, "unit": unit.key, "system": system.name}
        if self.log.find(**where) is None:
            storage = system.storage(db, USER, self.shared)
            self.log.append({**where, "build_key": system.build_key, "storage": _storage_record(storage)})

    def _answer_all(self, unit: Unit, system: System, db: Store) -> None:
        update = self.progress.step(f"{unit.key} {system.name}: questions", len(unit.questions))
        said = unit.messages  # what was said, for telling a copied line (anything with .content)
        for n, q in enumerate(unit.questions, start=1):
            where = {"kind": "answer", "benchmark": self.benchmark, "unit": unit.key, "system": system.name, "qid": q.qid}
            if self.log.find(**where) is None:
                self.shared.mark_read()
                reply = system.answer(db, USER, q.text, q.today, self.shared)
                record = {
                    **where,
                    "build_key": system.build_key,
                    **q.meta,
                    "question": q.text,
                    "gold": q.gold,
                    "answer": reply.answer,
                    "failed": reply.failed,
                    "abstained": reply.abstained,
                    "memories": reply.memories,
                    "context_tokens": reply.prompt_tokens,
                    "read_tokens": reply.read_tokens,  # of those, evaluated for this answer (the rest was a cached prefix)
                    "copied": answer_fixes.copied_line(reply.answer, said) is not None,  # a verbatim run of a message's words
                    "completion_tokens": reply.completion_tokens,
                    "search_ms": round(reply.search_ms, 2),
                    "answer_ms": round(reply.answer_ms, 1),
                    "note": reply.note,
                    **self.scorer(q, reply),
                }
                self.log.append(record)
            self.progress.question_done()
            if update:
                update(n, len(unit.questions))
