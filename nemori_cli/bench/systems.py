"""Benchmark systems: what each builds from a conversation and how it answers.

Every system shares the run's embedder, answer model and answer path
(retrieval/answer.answer_hits, the code `nemori ask` runs), so the only
thing that differs between two rows of a report is the memory and its context. A system is registered by name
(bench/catalog.py); systems whose
``build_key`` is equal share one built memory per conversation (an ablation
that changes only retrieval, such as answering without episodes, costs no
second ingest).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nemori_cli.domain import Answer, IncomingMessage
from nemori_cli.embed.base import Embedder
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.memory.semantic import SemanticSettings
from nemori_cli.retrieval.answer import ANSWER_TOKENS
from nemori_cli.store.contract import Store

Progress = Callable[[int, int], None]
__all__ = ["ANSWER_TOKENS"]  # kept free in a full-context prompt (baselines.py)


@dataclass
class Shared:
    """What every system of one run uses."""

    llm: StructuredLLM
    embedder: Embedder
    semantic: SemanticSettings
    count_tokens: Callable[[str], int]
    context_window: int  # the answer model's, in tokens
    answer_llm: StructuredLLM | None = None  # --answer-model; None: the memory model answers too
    read_mark: int = 0  # the answer backend's tokens_read when the current answer began

    @property
    def answerer(self) -> StructuredLLM:
        """The model that answers: answer_llm where given, else the memory model."""
        return self.answer_llm if self.answer_llm is not None else self.llm

    def tokens_read(self) -> int | None:
        """Prompt tokens the answer model has evaluated so far (not taken from a cached prefix); None where it cannot say."""
        return getattr(self.answerer.backend, "tokens_read", None)

    def mark_read(self) -> None:
        self.read_mark = self.tokens_read() or 0


@dataclass(frozen=True)
class Reply:
    answer: str
    turns: tuple[str, ...]  # source ids of the raw turns inside what was retrieved (evidence recall)
    memories: int  # how many memories the answer saw
    prompt_tokens: int  # the answer's context
    completion_tokens: int
    search_ms: float
    answer_ms: float
    failed: bool = False  # the model gave no usable answer (counted, scored as given)
    note: str = ""  # e.g. what a full-context prompt had to leave out
    abstained: bool = False  # the answer says the memories do not hold it
    read_tokens: int | None = None  # prompt tokens evaluated for it (the rest came from a cached prefix); None: not known


@dataclass(frozen=True)
class Storage:
    """The memory a system keeps, as the Nemori paper's storage table counts it."""

    entries: int
    characters: int
    tokens: int
    detail: dict = field(default_factory=dict)


class System:
    name: str = ""
    description: str = ""
    build_key: str = ""

    def build(self, db: Store, user: str, messages: list[IncomingMessage], shared: Shared, progress: Progress | None) -> None:
        raise NotImplementedError

    def answer(self, db: Store, user: str, question: str, today: str | None, shared: Shared) -> Reply:
        raise NotImplementedError

    def storage(self, db: Store, user: str, shared: Shared) -> Storage:
        raise NotImplementedError


def reply(shared: Shared, answer: Answer, *, search_ms: float, turns: tuple[str, ...], memories: int, note: str = "") -> Reply:
    """The bench's record of one answer; the answer model's call log is drained so nothing piles up."""
    calls, _ = shared.answerer.log.drain()
    # The context of one call: a retried call is logged with the tokens of all its attempts.
    prompt_tokens = sum(c.prompt_tokens // max(1, c.attempts) for c in calls)
    completion_tokens = sum(c.completion_tokens for c in calls)
    read = shared.tokens_read()
    return Reply(
        answer.answer,
        turns,
        memories,
        prompt_tokens,
        completion_tokens,
        search_ms,
        answer.answer_ms,
        answer.failed,
        note,
        answer.abstained,
        None if read is None else read - shared.read_mark,
    )


class AnsweredBy(System):
    """A system whose memory one model builds and another answers from (--answer-model): a report row of its own."""

    def __init__(self, inner: System, answer_model: str):
        self.inner = inner
        self.name = f"{inner.name}@{answer_model}"
        self.description = f"{inner.description}; answered by {answer_model}"
        self.build_key = inner.build_key  # the same memory as the system it wraps
        self.resumable = getattr(inner, "resumable", False)

    def build(self, db: Store, user: str, messages: list[IncomingMessage], shared: Shared, progress: Progress | None) -> None:
        self.inner.build(db, user, messages, shared, progress)

    def answer(self, db: Store, user: str, question: str, today: str | None, shared: Shared) -> Reply:
        return self.inner.answer(db, user, question, today, shared)  # inner systems answer with shared.answerer

    def storage(self, db: Store, user: str, shared: Shared) -> Storage:
        return self.inner.storage(db, user, shared)


class Listing:
    """The systems and groups one module offers, in the order it offers them.

    A module of systems fills its own listing; bench/catalog.py imports the
    modules and registers what they list by name (a system module never
    imports the catalog).
    """

    def __init__(self) -> None:
        self.systems: list[System] = []
        self.groups: dict[str, tuple[str, ...]] = {}  # names that stand for several systems

    def register(self, system: System) -> System:
        self.systems.append(system)
        return system

    def register_group(self, name: str, members: tuple[str, ...]) -> None:
        self.groups[name] = members
