"""The persisted pipeline: store messages, then turn the pending buffer into episodes.

Resumability comes from the database, not from memory: a message is pending
until the transaction that writes its episode commits. Each episode is one
unit of work: its integration with earlier episodes, its row and indexes, the
messages' ownership, its facts and their consolidation (or the summary), and
the LLM call log are one transaction. Ctrl-C or a crash at any point leaves
whole episodes done and the rest pending, and the next run picks them up.

The stages after narration run inside that transaction because each decision
reads what the previous one wrote: a fact distilled from this episode can be
evoked and consolidated against by the next. Readers are never blocked (WAL);
a second writer waits for the write lock (store/sqlite_connection.py: WRITE_WAIT_MS).

With ``workers`` above 1 (`ingest --workers N`, an OpenAI-compatible endpoint),
the calls that read only the messages (the partition of each window, the
narration of each episode) are made ahead on other threads (pipeline/ahead.py),
and this thread, the only one that touches the database, writes the episodes
in the same order and the same units as without workers, so the episodes are
the same. At most N requests are in flight (llm/inflight.py), and this
thread's calls, which every later episode waits on, get the next free one.
Several users' runs writing to one file at once (api.ingest_users) also make
each episode's own calls with SQLite's one write lock free (``lock_free_calls``,
llm/inflight.ReplayBackend): otherwise one user's unit of work would hold every
other's while the model answers.

When the model or endpoint fails for good (a ModelError), the episode in hand
is rolled back, the calls made so far are still logged (so `nemori stats`
counts the fault), and the error goes on with the rest pending. With
``stop_when_every_call_fails`` (the CLI's sessions), an episode is never
stored while every LLM call of this run has failed: a model that gives no
usable answer at all stops the run the same way, instead of building the
whole memory from fallbacks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import replace

from nemori_cli.config import DEFAULT_WINDOW
from nemori_cli.domain import IncomingMessage, to_epoch
from nemori_cli.embed.base import Embedder, serialized
from nemori_cli.errors import ModelError
from nemori_cli.llm.base import CallLog, StructuredLLM
from nemori_cli.llm.inflight import NeedAnswer, ReplayBackend, RequestSlots, SlotBackend
from nemori_cli.memory import modes
from nemori_cli.memory.amem import AmemSettings
from nemori_cli.memory.consolidate import ConsolidationSettings
from nemori_cli.memory.mode import NewEpisode, WorkerInputs
from nemori_cli.memory.profile import DEFAULT, Profile, record
from nemori_cli.memory.semantic import SemanticSettings
from nemori_cli.pipeline import integrate, plan
from nemori_cli.pipeline.ahead import LookAhead
from nemori_cli.pipeline.ingest_report import IngestReport, Progress
from nemori_cli.pipeline.intake import store_messages
from nemori_cli.pipeline.integrate import IntegrationSettings
from nemori_cli.pipeline.narrate import narrate, narrate_many
from nemori_cli.pipeline.partition import Group, PartitionSettings, partition
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import messages as message_sql
from nemori_cli.store import telemetry
from nemori_cli.store.contract import Store
from nemori_cli.store.episodes import EpisodeDraft

# With workers, the most times one episode's unit of work is run (each run but the last asks the model one
# request more, outside the write lock); a unit that asks more than this gets its last answers inside it.
MAX_RUNS = 64


class _NothingAnswered(Exception):
    """Every LLM call of this run so far has failed: raised inside the unit of work, so that it is rolled back."""

    def __init__(self, calls: int, last_problem: str):
        super().__init__(last_problem)
        self.calls, self.last_problem = calls, last_problem


class Pipeline:
    def __init__(
        self,
        db: Store,
        user: str,
        llm: StructuredLLM,
        embedder: Embedder,
        *,
        window: int = DEFAULT_WINDOW,
        profile: Profile = DEFAULT,
        partition_settings: PartitionSettings = PartitionSettings(),
        semantic: SemanticSettings = SemanticSettings(),
        integration: IntegrationSettings = IntegrationSettings(),
        consolidation: ConsolidationSettings = ConsolidationSettings(),
        notes: AmemSettings = AmemSettings(),
        stop_when_every_call_fails: bool = False,
    ):
        if window < 2:
            raise ValueError("window must be at least 2")
        # One lock around the embedder: with workers, windows are cut by similarity on another thread.
        self.db, self.user, self.llm, self.embedder = db, user, llm, serialized(embedder)
        self.window = window
        self.profile = profile
        self.mode = modes.for_profile(profile)
        self.partition_settings = replace(partition_settings, method=profile.partition)
        self.integration = integration
        self.continuation_check = integrate.SelfCheck(llm)
        distilling = SemanticSettings(semantic.evoke_k, semantic.threshold, direct=profile.distill == "direct")
        self.work = self.mode.start(profile, WorkerInputs(db, user, llm, self.embedder, distilling, consolidation, notes))
        self.tokens_used = 0  # this run's, counted as _episode drains the call log
        self.stop_when_every_call_fails = stop_when_every_call_fails
        # Set from another thread (api.ingest_users, when another user's run failed): this run starts no
        # further episode and returns, the rest pending, as a token budget stops it.
        self.cancel = threading.Event()
        self._replay: ReplayBackend | None = None  # while workers run: the writer's calls are made outside the write lock

    def add_messages(self, incoming: list[IncomingMessage], namespace: str = "") -> int:
        """Store new messages and index them for search (store_messages); returns how many were new."""
        return store_messages(self.db, self.user, self.profile, self.embedder, incoming, namespace)

    def process(
        self,
        *,
        flush: bool,
        progress: Progress | None = None,
        max_tokens: int | None = None,
        workers: int = 1,
        slots: RequestSlots | None = None,
        lock_free_calls: bool = False,
    ) -> IngestReport:
        """Turn pending messages into episodes, window by window.

        Without ``flush``, a tail shorter than the window waits for more
        messages; the last group of a full window also waits, because the
        conversation it belongs to may go on in the next messages.
        With ``max_tokens``, no episode is started once this run's calls have
        used that many tokens; the first always is, so every run makes progress.
        With ``workers`` above 1, up to that many requests are in flight
        (``slots``: a count shared with other runs; by default this run's own);
        the backend must take requests from several threads (an endpoint).
        With ``lock_free_calls`` too (several users' runs writing to one file at
        once), each episode's calls are made with the write lock free
        (llm/inflight.ReplayBackend), at the cost of running its unit of work again
        after each one (milliseconds each).
        """
        if workers < 1:
            raise ValueError("workers must be at least 1")
        report = IngestReport()
        self.tokens_used = 0
        try:
            return self._process(report, flush, progress, max_tokens, workers, slots, lock_free_calls)
        except _NothingAnswered as e:
            self._keep_call_log()
            left = self.mode.backlog(self.db, self.user).messages
            raise ModelError(
                f"model {self.llm.model_id} gave no usable answer: all {e.calls} LLM calls of this run failed "
                f"(last: {e.last_problem}); nothing was built from them and {left} messages are pending: "
                "check the model with `nemori doctor`, then rerun the same command (or `nemori build`)"
            ) from None
        except ModelError as e:
            self._keep_call_log()
            left = self.mode.backlog(self.db, self.user).messages
            raise ModelError(
                f"{e.message}; {left} messages are pending and nothing is lost: rerun the same command (or `nemori build`) to resume"
            ) from None

    def _keep_call_log(self) -> None:
        """The calls of the unit of work that was rolled back, written on their own: the fault shows in `nemori stats`."""
        calls, events = self.llm.log.drain()
        if calls or events:
            with self.db.transaction(user=self.user):
                telemetry.write(self.db, self.user, calls, events)

    def _count(self, report: IngestReport, calls, events) -> None:
        """What a committed unit of work's calls add to the run's report."""
        self.tokens_used += sum(c.prompt_tokens + c.completion_tokens for c in calls)
        report.llm_calls += len(calls)
        report.llm_failed += sum(c.outcome == "failed" for c in calls)
        report.fallbacks += sum(e.kind == "fallback" for e in events)

    def _check_something_answered(self, report: IngestReport) -> None:
        """With stop_when_every_call_fails: refuse to store a unit of work while every call of this run has failed."""
        if not self.stop_when_every_call_fails:
            return
        calls = self.llm.log.calls
        total = report.llm_calls + len(calls)
        failed = report.llm_failed + sum(c.outcome == "failed" for c in calls)
        if failed and failed == total:
            last = next((e.detail for e in reversed(self.llm.log.events) if e.kind == "fallback"), "no detail")
            raise _NothingAnswered(total, " ".join(last.split())[:240])

    def _process(
        self,
        report: IngestReport,
        flush: bool,
        progress: Progress | None,
        max_tokens: int | None,
        workers: int = 1,
        slots: RequestSlots | None = None,
        lock_free_calls: bool = False,
    ) -> IngestReport:
        started = time.perf_counter()

        def over_budget() -> bool:  # or stopped from outside (``cancel``): no further episode is started
            if self.cancel.is_set():
                return True
            report.stopped_by_budget = max_tokens is not None and self.tokens_used >= max_tokens
            return report.stopped_by_budget

        with self.db.transaction(user=self.user):
            record(self.db, self.profile)  # a database made before profiles existed gets one now
        if not self.mode.makes_episodes:
            self._one_by_one(report, over_budget, progress)
            report.seconds = time.perf_counter() - started
            return report
        total = self.mode.backlog(self.db, self.user).messages
        done = 0

        def tick(messages: int) -> None:
            nonlocal done
            done += messages
            if progress:
                progress(done, total)

        tick(0)
        self._planned(report, over_budget, tick)  # what a stopped run had cut and not written, as it was cut
        if workers > 1 and not report.stopped_by_budget and not self.cancel.is_set():
            self._windows_ahead(report, flush, over_budget, tick, workers, slots or RequestSlots(workers), lock_free_calls)
        if not report.stopped_by_budget and not self.cancel.is_set():  # what is left: all of it, or what changed under the look-ahead
            self._windows(report, flush, over_budget, tick)
        report.pending = self.mode.backlog(self.db, self.user).messages
        report.tokens_used = self.tokens_used
        if report.windows:
            self.db.checkpoint()
        report.seconds = time.perf_counter() - started
        return report

    def _planned(self, report: IngestReport, over_budget: Callable[[], bool], tick: Callable[[int], None]) -> None:
        """The groups of a window that a stopped run had cut but not all written (pipeline/plan.py), written as they were cut."""
        groups = plan.left(self.db, self.user)
        for group in groups:
            if over_budget():
                return
            self._episode(group, report)
            tick(len(group.messages))
        if groups:
            report.windows += 1

    def _windows(self, report: IngestReport, flush: bool, over_budget: Callable[[], bool], tick: Callable[[int], None]) -> None:
        """Window by window from the database's buffer, each episode narrated just before it is written."""
        while True:
            window = message_sql.pending(self.db, self.user, limit=self.window)
            full = len(window) >= self.window
            if not window or (not full and not flush) or over_budget():
                break
            more_after = self.mode.backlog(self.db, self.user).messages > len(window)
            groups = partition(window, self.llm, self.embedder, self.partition_settings)
            if len(groups) > 1 and (more_after or not flush):
                groups = groups[:-1]  # carried into the next window
            if over_budget():  # stopped while the window was cut: nothing of it is narrated, and it is cut again next run
                break
            # With a backend that takes several generations at once, the window's narrations
            # are written together first (they are independent); the rest stays one episode,
            # one transaction. A budget that stops mid-window wastes the drafts not stored.
            with self.db.transaction(user=self.user):
                plan.save(self.db, self.user, groups)
            drafts = narrate_many(groups, self.llm) if len(groups) > 1 and getattr(self.llm.backend, "parallel", 1) > 1 else None
            for i, group in enumerate(groups):
                if over_budget():  # the rest of this window is partitioned again next run
                    break
                self._episode(group, report, drafts[i] if drafts else None)
                tick(len(group.messages))
            report.windows += 1
            if report.stopped_by_budget:
                break

    def _windows_ahead(
        self,
        report: IngestReport,
        flush: bool,
        over_budget: Callable[[], bool],
        tick: Callable[[int], None],
        workers: int,
        slots: RequestSlots,
        lock_free_calls: bool,
    ) -> None:
        """The same windows and episodes as `_windows`, their partitions and narrations made ahead (pipeline/ahead.py).

        Each window is checked against the database's buffer before it is
        written: if another process added or took messages meanwhile, the
        look-ahead is dropped and `_windows` goes on from what is stored.
        """
        raw = self.llm.backend
        retries = self.llm.retries

        def task_llm() -> StructuredLLM:
            return StructuredLLM(SlotBackend(raw, slots), CallLog(), retries=retries)

        # This thread's own calls (integration, facts) take slots too, ahead of any look-ahead call waiting;
        # with lock_free_calls, with no lock held: each unit of work runs again once its answer is in (llm/inflight.ReplayBackend).
        writer = SlotBackend(raw, slots, urgent=True)
        self._replay = ReplayBackend(writer) if lock_free_calls else None
        self.llm.backend = self._replay or writer
        look_ahead = LookAhead(
            message_sql.pending(self.db, self.user), window=self.window, flush=flush, make_llm=task_llm,
            embedder=self.embedder, settings=self.partition_settings, workers=workers,
        )  # fmt: skip
        clean = False
        try:
            while (planned := look_ahead.next()) is not None:
                if not planned.window:
                    planned.partition.into(self.llm)  # the look-ahead itself failed: raise what it raised
                head = message_sql.pending(self.db, self.user, limit=self.window)
                if [m.id for m in head] != [m.id for m in planned.window] or over_budget():
                    break
                planned.partition.into(self.llm)  # the cut's calls, stored with the window's first episode
                with self.db.transaction(user=self.user):
                    plan.save(self.db, self.user, list(planned.groups))
                for group, draft in zip(planned.groups, planned.drafts):
                    if over_budget():
                        break
                    self._episode(group, report, draft.result().into(self.llm))
                    tick(len(group.messages))
                report.windows += 1
                if report.stopped_by_budget:
                    break
            clean = True
        finally:
            look_ahead.stop(wait=clean)
            self.llm.backend, self._replay = raw, None

    # -- a mode without episodes (--memory amem): one message, one transaction --
    def _one_by_one(self, report: IngestReport, over_budget: Callable[[], bool], progress: Progress | None) -> None:
        """Every pending message gets its memory, oldest first; no lookahead is needed, so flush changes nothing."""
        total = self.mode.backlog(self.db, self.user).messages
        done = 0
        if progress:
            progress(0, total)
        while not over_budget():
            ids = self.mode.waiting(self.db, self.user, limit=50)
            if not ids:
                break
            found = message_sql.by_ids(self.db, self.user, ids)
            for message in (found[i] for i in ids if i in found):
                if over_budget():
                    break
                plan = self.work.plan_message(message)  # the model calls, before the write lock is taken
                self._check_something_answered(report)
                with self.db.transaction(user=self.user):
                    added = self.work.write_message(plan)
                    if added is None:
                        continue  # another process did this one meanwhile
                    calls, events = self.llm.log.drain()
                    telemetry.write(self.db, self.user, calls, events)
                self._count(report, calls, events)
                report.notes += added.notes
                done += 1
                if progress:
                    progress(done, total)
            report.windows += 1
        report.pending = self.mode.backlog(self.db, self.user).messages
        report.tokens_used = self.tokens_used
        if report.notes:
            self.db.checkpoint()

    # -- one episode, one transaction ------------------------------------
    def _episode(self, group: Group, report: IngestReport, draft: EpisodeDraft | None = None) -> None:
        draft = draft or narrate(group, self.llm)  # the slowest call, made before any lock is taken
        replay = self._replay
        try:
            for attempt in range(MAX_RUNS):
                if replay is not None and attempt == MAX_RUNS - 1:
                    self.llm.backend = replay.inner  # a unit that never ran through: its last run asks inside the lock, as without workers
                saved = [(o, dict(vars(o))) for o in self._state_outside_store()]
                logged = len(self.llm.log.calls), len(self.llm.log.events)
                try:
                    with self.embedder.remembering() if replay else nullcontext(), self.db.transaction(user=self.user):
                        if not message_sql.still_pending(self.db, self.user, [m.id for m in group.messages]):
                            return  # another process took these messages meanwhile; nothing to add
                        vector = self._vector(draft, group.messages)
                        episode_id, merged = self._integrate(draft, group, vector)
                        added = self.work.after_episode(NewEpisode(episode_id, draft, tuple(group.messages), vector))
                        plan.written(self.db, self.user, [m.id for m in group.messages])
                        self._check_something_answered(report)  # rolls this episode back if nothing of this run answered
                        calls, events = self.llm.log.drain()
                        telemetry.write(self.db, self.user, calls, events)
                    break
                except NeedAnswer as need:  # rolled back; what this run of it logged and learned goes with it
                    del self.llm.log.calls[logged[0] :], self.llm.log.events[logged[1] :]
                    for o, state in saved:
                        vars(o).clear()
                        vars(o).update(state)
                    assert replay is not None
                    replay.fetch(need)  # asked with no lock held; the unit runs again
                finally:
                    if replay is not None and attempt == MAX_RUNS - 1:
                        self.llm.backend = replay
        finally:
            if replay is not None:
                replay.clear()  # the answers were this episode's
        # Counted once the transaction has committed: what a budget measures is work kept.
        report.episodes += 0 if merged else 1
        report.merged += int(merged)
        report.facts += added.facts
        report.notes += added.notes
        self._count(report, calls, events)

    def _state_outside_store(self) -> list[object]:
        """Objects holding what this run keeps outside the store (its self-checks' verdicts), restored when a unit is run again."""
        return [self.continuation_check, *self.work.state_outside_store()] if self._replay is not None else []

    def _index_text(self, messages) -> str | None:
        """What the indexes hold for an episode: its narrative (N), or its raw messages (P)."""
        if self.profile.index == "narrative":
            return None
        return "\n".join(f"{m.speaker}: {m.content}" for m in messages)

    def _vector(self, draft: EpisodeDraft, messages):
        text = self._index_text(messages)
        return self.embedder.embed_documents([f"{draft.title}\n{draft.narrative if text is None else text}"])[0]

    def _integrate(self, draft: EpisodeDraft, group: Group, vector) -> tuple[int, bool]:
        """Store the episode, merged into the one it continues if any; returns (live id, merged?)."""
        shown = integrate.candidates(self.db, self.user, draft, vector, self.integration) if self.profile.integrate else []
        old = integrate.choose(self.llm, draft, shown) if shown and self.continuation_check.passed() else None
        new_id = episode_sql.add(self.db, self.user, draft, vector, self._index_text(group.messages))
        if old is None:
            return new_id, False
        merged = integrate.merge(self.llm, old, draft)
        old_messages = message_sql.of_episodes(self.db, self.user, [old.id])[old.id]
        everything = sorted([*old_messages, *group.messages], key=lambda m: (to_epoch(m.timestamp), m.id))
        merged_id = episode_sql.add(self.db, self.user, merged, self._vector(merged, everything), self._index_text(everything))
        episode_sql.supersede(self.db, self.user, [old.id], merged_id, f"continued by E{new_id}; both merged into E{merged_id}")
        episode_sql.supersede(self.db, self.user, [new_id], merged_id, f"continues E{old.id}; both merged into E{merged_id}")
        return merged_id, True
