"""Benchmark systems: what each builds from a conversation and how it answers.

Every system shares the run's embedder, answer model and answer prompt
(prompts/answer.py), so the only thing that differs between two rows of a
report is the memory. A system is registered by name; systems whose
``build_key`` is equal share one built memory per conversation (an ablation
that changes only retrieval, such as answering without episodes, costs no
second ingest).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nemori_cli.domain import Hit, IncomingMessage
from nemori_cli.embed.base import Embedder
from nemori_cli.errors import ConfigError, LLMOutputError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.pipeline.semantic import SemanticSettings
from nemori_cli.prompts import answer as answer_prompt
from nemori_cli.store.db import Database

Progress = Callable[[int, int], None]
ANSWER_TOKENS = 120  # what the answer may spend; also kept free in a full-context prompt


@dataclass
class Shared:
    """What every system of one run uses."""

    llm: StructuredLLM
    embedder: Embedder
    semantic: SemanticSettings
    count_tokens: Callable[[str], int]
    context_window: int  # the answer model's, in tokens


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

    def build(self, db: Database, user: str, messages: list[IncomingMessage], shared: Shared, progress: Progress | None) -> None:
        raise NotImplementedError

    def answer(self, db: Database, user: str, question: str, today: str | None, shared: Shared) -> Reply:
        raise NotImplementedError

    def storage(self, db: Database, user: str, shared: Shared) -> Storage:
        raise NotImplementedError


FAILED_ANSWER = "(no usable answer)"


def answer_from(
    shared: Shared,
    question: str,
    hits: list[Hit],
    *,
    today: str | None,
    raw_for_top: int,
    context: str = "narrative",
    message_limit: int = 200,
) -> tuple[str, int, int, float, bool]:
    """The one answer call every system makes: (answer, prompt tokens, completion tokens, ms, failed)."""
    started = time.perf_counter()
    episode_ids = tuple(h.id for h in hits if h.kind == "episode")
    messages = answer_prompt.render(question, hits, raw_for_top=raw_for_top, now=today, context=context, message_limit=message_limit)
    try:
        done = shared.llm.complete(messages, schema=answer_prompt.schema_for(episode_ids), stage="answer", max_tokens=ANSWER_TOKENS)
        text, failed = done.value.answer.strip(), False
    except LLMOutputError:
        text, failed = FAILED_ANSWER, True
    calls, _ = shared.llm.log.drain()  # the bench keeps its own record; nothing piles up in memory
    # The context of one call: a retried call is logged with the tokens of all its attempts.
    prompt_tokens = sum(c.prompt_tokens // max(1, c.attempts) for c in calls)
    completion_tokens = sum(c.completion_tokens for c in calls)
    return text, prompt_tokens, completion_tokens, (time.perf_counter() - started) * 1000, failed


# -- the registry -----------------------------------------------------------
_REGISTRY: dict[str, System] = {}
# Names that stand for several systems.
_GROUPS: dict[str, tuple[str, ...]] = {}


def register(system: System) -> System:
    if system.name in _REGISTRY:
        raise ValueError(f"system {system.name!r} registered twice")
    _REGISTRY[system.name] = system
    return system


def register_group(name: str, members: tuple[str, ...]) -> None:
    _GROUPS[name] = members


def _load() -> None:
    # Importing the modules registers their systems (a new memory mode adds itself the same way).
    from nemori_cli.bench import nemori_systems  # noqa: F401  (first: listed first)
    from nemori_cli.bench import baselines  # noqa: F401


def available() -> dict[str, System]:
    _load()
    return dict(_REGISTRY)


def groups() -> dict[str, tuple[str, ...]]:
    _load()
    return dict(_GROUPS)


def resolve(names: str) -> list[System]:
    """'nemori,rag' -> the systems, groups expanded, order kept, each once; unknown names refused."""
    systems = available()
    chosen: list[str] = []
    for raw in names.split(","):
        name = raw.strip()
        if not name:
            continue
        members = _GROUPS.get(name, (name,))
        for member in members:
            if member not in systems:
                known = ", ".join([*systems, *_GROUPS])
                raise ConfigError(f"--systems: unknown system {name!r}; known: {known}")
            if member not in chosen:
                chosen.append(member)
    if not chosen:
        raise ConfigError("--systems: no system named")
    return [systems[n] for n in chosen]
