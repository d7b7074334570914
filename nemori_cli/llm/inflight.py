"""At most N requests in flight to one endpoint, shared by every thread of a run (`ingest --workers N`).

``RequestSlots(n)`` is the count; ``SlotBackend(backend, slots, urgent=...)`` is a
backend whose every ``chat`` holds one slot while it waits for its answer. The
runner's writer thread asks *urgent*: its calls (integration, prediction,
distillation, consolidation) are the chain every later episode waits on, so
they get the next free slot before any look-ahead call (a partition or a
narration of a later episode) that is waiting too. Nothing is reordered
beyond that: each thread's calls go in the order it makes them.

A SlotBackend's ``chat_many`` sends its requests at once, each holding a
slot of its own: a thread's independent questions (the consolidation of one
fact against several) wait for one answer's time, not for each in turn.

``ReplayBackend`` keeps the write lock free while the model thinks. A unit of work
(one episode: its integration, facts and consolidation, one transaction)
asks the model between its reads and writes. Run with a ReplayBackend, a
request it has no answer to yet raises ``NeedAnswer``: the unit is rolled
back, the request is asked with no lock held (``fetch``), and the unit runs
again, this time getting that answer at once, until it runs through and
commits. Each request is asked once; what is replayed is only the unit's own
reads and writes, milliseconds. SQLite has one write lock per file, so with
the model's calls inside it, one user's unit of work would hold every other
user's (every other thread's or process's) for as long as the model takes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from nemori_cli.errors import LLMOutputError, ModelError
from nemori_cli.llm.base import ChatBackend, ChatMessages, ChatRequest, RawCompletion


class RequestSlots:
    """A count of requests in flight, at most ``limit``; ``most`` is the highest it reached (for tests and benchmarks)."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self.busy = 0
        self.most = 0
        self._urgent_waiting = 0
        self._free = threading.Condition()

    @contextmanager
    def slot(self, *, urgent: bool = False) -> Iterator[None]:
        with self._free:
            if urgent:
                self._urgent_waiting += 1
                try:
                    self._free.wait_for(lambda: self.busy < self.limit)
                finally:
                    self._urgent_waiting -= 1
            else:
                self._free.wait_for(lambda: self.busy < self.limit and not self._urgent_waiting)
            self.busy += 1
            self.most = max(self.most, self.busy)
        try:
            yield
        finally:
            with self._free:
                self.busy -= 1
                self._free.notify_all()


class SlotBackend:
    """``backend`` with every request holding one of ``slots`` while it is in flight."""

    parallel = 1  # not a batched decoder: the runner's window-at-once narration is not for it
    exact_many = True  # chat_many's answers are the ones chat gives alone (llm/base.StructuredLLM.complete_together)

    def __init__(self, backend: ChatBackend, slots: RequestSlots, *, urgent: bool = False):
        self.inner, self.slots, self.urgent = backend, slots, urgent
        self.model_id = backend.model_id

    def chat(self, messages: ChatMessages, *, schema: dict, max_tokens: int, temperature: float) -> RawCompletion:
        with self.slots.slot(urgent=self.urgent):
            return self.inner.chat(messages, schema=schema, max_tokens=max_tokens, temperature=temperature)

    def chat_many(self, requests: list[ChatRequest]) -> list[RawCompletion | LLMOutputError]:
        """Each request's completion, in order, all in flight at once (as slots allow); a ModelError stops them all."""
        if len(requests) < 2:
            return [self._one(r) for r in requests]
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=len(requests), thread_name_prefix="nemori-many")
        futures = [pool.submit(self._one, r) for r in requests]
        try:
            return [f.result() for f in futures]
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _one(self, r: ChatRequest) -> RawCompletion | LLMOutputError:
        try:
            return self.chat(r.messages, schema=r.schema, max_tokens=r.max_tokens, temperature=r.temperature)
        except LLMOutputError as e:
            return e


class NeedAnswer(BaseException):
    """A request a ReplayBackend has no answer to yet; raised through the unit of work, which is rolled back.

    A BaseException, as KeyboardInterrupt is: no stage's ``except Exception``
    may take it for a model's failure.
    """

    def __init__(self, key: str, messages: ChatMessages, schema: dict, max_tokens: int, temperature: float):
        super().__init__("a model request to make outside the write lock")
        self.key, self.messages, self.schema, self.max_tokens, self.temperature = key, messages, schema, max_tokens, temperature


class ReplayBackend:
    """Answers the requests already asked (``fetch``) and raises NeedAnswer for any other; ``clear`` once the unit commits."""

    parallel = 1

    def __init__(self, backend: ChatBackend):
        self.inner = backend
        self.model_id = backend.model_id
        self._answers: dict[str, tuple[RawCompletion | LLMOutputError | ModelError, float]] = {}

    @staticmethod
    def _key(messages: ChatMessages, schema: dict, max_tokens: int, temperature: float) -> str:
        return json.dumps([messages, schema, max_tokens, temperature], sort_keys=True)

    def chat(self, messages: ChatMessages, *, schema: dict, max_tokens: int, temperature: float) -> RawCompletion:
        key = self._key(messages, schema, max_tokens, temperature)
        if key not in self._answers:
            raise NeedAnswer(key, messages, schema, max_tokens, temperature)
        answer, ms = self._answers[key]
        if isinstance(answer, BaseException):
            raise answer  # the endpoint's fault, met where the unit asked, as without a replay
        return replace(answer, ms=ms)

    def fetch(self, need: NeedAnswer) -> None:
        """Ask ``need``'s request for real (no lock held); its answer, or the fault it met, is kept for the next run of the unit."""
        started = time.perf_counter()
        answer: RawCompletion | LLMOutputError | ModelError
        try:
            answer = self.inner.chat(need.messages, schema=need.schema, max_tokens=need.max_tokens, temperature=need.temperature)
        except (LLMOutputError, ModelError) as e:
            answer = e
        self._answers[need.key] = (answer, (time.perf_counter() - started) * 1000)

    def clear(self) -> None:
        self._answers.clear()
