"""Look-ahead for `ingest --workers N`: the model calls that depend only on the messages, made ahead of the writer.

What an episode needs falls in two parts. Its partition and its narration
read nothing but the messages: the window a partition cuts is the group the
previous window carried over plus the next pending messages, so every window
can be cut, and every group narrated, before any episode is written. What
follows (integration, prediction, distillation, consolidation, the summary)
reads what the episodes before it wrote, and stays on the writer, in order,
one transaction per episode, exactly as without workers.

``LookAhead`` runs the first part from a snapshot of the pending buffer: one
thread cuts the windows in order (each cut decides where the next window
starts), and a pool of threads narrates the groups as they come. The writer
takes the windows in order with ``next()``; each group's draft is a future.
Every task logs to a call log of its own, handed back with its result, so the
writer stores each call with the episode it belongs to, as it would have
without workers. Nothing here touches the database.

The look-ahead is bounded (``depth`` windows waiting for the writer): a run
stopped early (a token budget, an error, Ctrl-C) wastes at most those windows'
calls.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Generic, TypeVar

from nemori_cli.domain import CallRecord, EventRecord, Message
from nemori_cli.embed.base import Embedder
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.pipeline.narrate import narrate
from nemori_cli.pipeline.partition import Group, PartitionSettings, partition

T = TypeVar("T")


@dataclass
class Outcome(Generic[T]):
    """What one task made (or the exception it raised), with the calls and events it logged."""

    value: T | None = None
    error: BaseException | None = None
    calls: list[CallRecord] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)

    def into(self, llm: StructuredLLM) -> T | None:
        """Hand the task's log to ``llm``'s (the writer's), then its value, or raise its error."""
        llm.log.calls.extend(self.calls)
        llm.log.events.extend(self.events)
        self.calls, self.events = [], []
        if self.error is not None:
            raise self.error
        return self.value


def logged(make_llm: Callable[[], StructuredLLM], task: Callable[[StructuredLLM], T]) -> Outcome[T]:
    llm = make_llm()
    try:
        value, error = task(llm), None
    except Exception as e:  # handed to the writer, which raises it where the run without workers would have
        value, error = None, e
    calls, events = llm.log.drain()
    return Outcome(value, error, calls, events)


@dataclass
class Planned:
    """One window as the writer will meet it: the groups it writes now (the last one may be carried) and their drafts."""

    window: list[Message]
    groups: list[Group]
    partition: Outcome[list[Group]]  # the cut's calls and events (or the error that stopped it); its value is dropped once taken
    drafts: list[Future]  # Future[Outcome[EpisodeDraft]], one per group


class LookAhead:
    """Cuts the windows of ``pending`` in order on one thread and narrates their groups on ``workers`` more.

    ``pending`` is the whole buffer, oldest first, as the writer's loop would
    read it window by window; ``flush`` as in Pipeline.process.
    """

    def __init__(
        self,
        pending: list[Message],
        *,
        window: int,
        flush: bool,
        make_llm: Callable[[], StructuredLLM],
        embedder: Embedder,
        settings: PartitionSettings,
        workers: int,
        depth: int | None = None,
    ):
        self.pending, self.window, self.flush = pending, window, flush
        self.make_llm, self.embedder, self.settings = make_llm, embedder, settings
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nemori-narrate")
        self._windows: queue.Queue[Planned | None] = queue.Queue(maxsize=depth or max(2, workers))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._cut, name="nemori-partition", daemon=True)
        self._thread.start()

    # -- the cutting thread ----------------------------------------------
    def _cut(self) -> None:
        carry: list[Message] = []
        at = 0  # the first message of `pending` not yet in a window
        try:
            while not self._stop.is_set():
                taken = self.pending[at : at + self.window - len(carry)]
                at += len(taken)
                window = carry + taken
                if not window or (len(window) < self.window and not self.flush):
                    break
                more_after = at < len(self.pending)
                cut = logged(self.make_llm, partial(partition, window, embedder=self.embedder, settings=self.settings))
                if cut.error is not None:
                    self._put(Planned(window, [], cut, []))
                    break
                groups = cut.value or []
                carry = []
                if len(groups) > 1 and (more_after or not self.flush):
                    carry, groups = list(groups[-1].messages), groups[:-1]  # carried into the next window
                cut.value = None
                drafts = [self._pool.submit(logged, self.make_llm, lambda llm, g=g: narrate(g, llm)) for g in groups]
                if not self._put(Planned(window, groups, cut, drafts)):
                    break
        except BaseException as e:  # a bug, not a model's fault: the writer raises it
            self._put(Planned([], [], Outcome(error=e), []))
        finally:
            self._put(None)

    def _put(self, item: Planned | None) -> bool:
        while not self._stop.is_set():
            try:
                self._windows.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    # -- the writer's side -------------------------------------------------
    def next(self) -> Planned | None:
        """The next window in order; None once every window is cut."""
        while True:
            try:
                return self._windows.get(timeout=0.05)
            except queue.Empty:
                if not self._thread.is_alive() and self._windows.empty():
                    return None

    def stop(self, *, wait: bool) -> None:
        """Stop cutting and drop the narrations not started.

        With ``wait`` (the run is over, or stopped by its budget), the calls in
        flight are waited for; without (an error, Ctrl-C), they finish on their
        own. The calls of work cut or narrated ahead and never written are not
        stored, as a run without workers does not store a window's drafts it
        did not write.
        """
        self._stop.set()
        self._pool.shutdown(wait=wait, cancel_futures=True)
        if wait:
            self._thread.join()
