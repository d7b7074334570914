"""The one road every LLM call takes: constrained, validated, retried, logged.

A backend turns chat messages plus a JSON schema into raw text, constrained by
whatever the backend supports (a llama.cpp grammar, an endpoint's
response_format). ``StructuredLLM.complete`` validates that text against the
pydantic model, retries a bounded number of times, and logs every call. When
no attempt is usable it raises LLMOutputError: the calling stage then falls
back deterministically and counts it. Nothing here ever returns an empty
result in place of an error.

A backend that cannot read an answer at all (an endpoint's body that is not a
chat completion, a refusal) raises LLMOutputError itself; that attempt counts
as an invalid one. ``ContextOverflow`` (the prompt does not fit) is not asked
again. A ModelError (the model or endpoint is unusable) is logged as a failed
call and passes through: it stops the command, and the runner keeps the log.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from nemori_cli.domain import CallRecord, EventRecord
from nemori_cli.errors import LLMOutputError, ModelError
from nemori_cli.llm.schema import decoder_safe
from nemori_cli.stages import Stage

if TYPE_CHECKING:  # annotations only: an endpoint needs no numpy nor ctypes, which prefix_states loads
    from nemori_cli.llm.prefix_states import PrefixStates, Snapshot

T = TypeVar("T", bound=BaseModel)

ChatMessages = list[dict[str, str]]


class ContextOverflow(LLMOutputError):
    """The prompt is longer than the model's context: asking again cannot help, so the stage falls back at once."""


@dataclass(frozen=True)
class RawCompletion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    # Milliseconds the request took when it was asked earlier and this is its answer handed on
    # (llm/inflight.ReplayBackend); None: it was asked just now, and the call's own clock counts it.
    ms: float | None = None


class ChatBackend(Protocol):
    model_id: str

    def chat(self, messages: ChatMessages, *, schema: dict, max_tokens: int, temperature: float) -> RawCompletion: ...


@dataclass(frozen=True)
class ChatRequest:
    """One call's arguments, for a backend that can take several at once (``chat_many``)."""

    messages: ChatMessages
    schema: dict
    max_tokens: int
    temperature: float


class ManyBackend(ChatBackend, Protocol):
    """A backend that decodes or sends several requests at once: in order, one RawCompletion or LLMOutputError each.

    A ModelError (the model or endpoint is unusable) is raised, not returned: it stops the command.
    """

    def chat_many(self, requests: list[ChatRequest]) -> list[RawCompletion | LLMOutputError]: ...


@runtime_checkable
class PrefillBackend(ChatBackend, Protocol):
    """A backend that reads a prompt's beginning ahead and keeps its KV state (llm/llamacpp.py), for retrieval/core_cache.py."""

    states: PrefixStates
    tokens_read: int  # prompt tokens evaluated, not taken from a cached prefix

    def can_prefill(self) -> bool: ...

    def prefill(self, messages: ChatMessages) -> Snapshot | None: ...

    def state_identity(self) -> dict: ...

    def adopt_prefix(self, snapshot: Snapshot) -> None: ...

    def prefix_tokens(self, messages: ChatMessages) -> list[int]: ...


@dataclass
class CallLog:
    """The sink an LLM logs to: calls and pipeline events, held until whoever owns the unit of work drains them.

    The LLM layer never writes anywhere itself; the runner stores what it
    drains with its transaction (store/telemetry.py), the bench counts it.
    """

    calls: list[CallRecord] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)

    def repaired(self, stage: Stage, detail: str) -> None:
        self.events.append(EventRecord(stage.name, "repaired", detail))

    def fallback(self, stage: Stage, detail: str) -> None:
        self.events.append(EventRecord(stage.name, "fallback", detail))

    def decision(self, stage: Stage, detail: str) -> None:
        """What a memory-management step decided (integration, consolidation): the audit trail."""
        self.events.append(EventRecord(stage.name, "decision", detail))

    def drain(self) -> tuple[list[CallRecord], list[EventRecord]]:
        calls, events = self.calls, self.events
        self.calls, self.events = [], []
        return calls, events


@dataclass(frozen=True)
class Completion(Generic[T]):
    value: T
    prompt_tokens: int
    completion_tokens: int
    ms: float


class StructuredLLM:
    def __init__(self, backend: ChatBackend, log: CallLog | None = None, *, retries: int = 1):
        self.backend = backend
        self.log = log or CallLog()
        self.retries = retries

    @property
    def model_id(self) -> str:
        return self.backend.model_id

    def complete(
        self,
        messages: ChatMessages,
        *,
        schema: type[T],
        stage: Stage,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> Completion[T]:
        """One validated answer; ``max_tokens`` defaults to the stage's own cap (stages.py)."""
        return self._attempts(messages, schema, stage, stage.max_tokens if max_tokens is None else max_tokens, temperature)

    def complete_many(
        self,
        prompts: list[ChatMessages],
        *,
        schema: type[T],
        stage: Stage,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> list[Completion[T] | LLMOutputError]:
        """A validated answer for each prompt, or the LLMOutputError its stage falls back on, in order.

        The first attempts go to the backend together when it can take several
        (``chat_many``: a batched decoder, or requests in flight at once); each
        retry is made on its own, as `complete` makes it. Every prompt is a
        call of its own in the log. A ModelError stops them all.
        """
        cap = stage.max_tokens if max_tokens is None else max_tokens
        many = getattr(self.backend, "chat_many", None)
        firsts: list[RawCompletion | LLMOutputError | None] = [None] * len(prompts)
        share = 0.0
        if many is not None and len(prompts) > 1:
            json_schema = decoder_safe(schema.model_json_schema())
            began = time.perf_counter()
            try:
                firsts = many([ChatRequest(m, json_schema, cap, temperature) for m in prompts])
            except ModelError:
                self._record(stage, 0, 0, (time.perf_counter() - began) * 1000, 1, "failed")
                raise
            # The batch's time is shared out evenly: what each call cost on its own is not observable.
            share = (time.perf_counter() - began) / len(prompts)
        out: list[Completion[T] | LLMOutputError] = []
        for i, messages in enumerate(prompts):
            started = time.perf_counter() - share if firsts[i] is not None else None
            try:
                out.append(self._attempts(messages, schema, stage, cap, temperature, first=firsts[i], started=started))
            except LLMOutputError as e:
                out.append(e)
        return out

    def complete_together(
        self,
        prompts: list[ChatMessages],
        *,
        schema: type[T],
        stage: Stage,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> list[Completion[T] | LLMOutputError]:
        """Independent prompts, each answered as `complete` would answer it alone, in order.

        They go to the backend at once only when it says each answer is the one
        it would give alone (``exact_many``: requests in flight to an endpoint);
        otherwise one after another (a batched decoder rounds otherwise).
        """
        if getattr(self.backend, "exact_many", False) and len(prompts) > 1:
            return self.complete_many(prompts, schema=schema, stage=stage, max_tokens=max_tokens, temperature=temperature)
        out: list[Completion[T] | LLMOutputError] = []
        for messages in prompts:
            try:
                out.append(self.complete(messages, schema=schema, stage=stage, max_tokens=max_tokens, temperature=temperature))
            except LLMOutputError as e:
                out.append(e)
        return out

    def _attempts(
        self,
        messages: ChatMessages,
        schema: type[T],
        stage: Stage,
        max_tokens: int,
        temperature: float,
        *,
        first: RawCompletion | LLMOutputError | None = None,
        started: float | None = None,
    ) -> Completion[T]:
        """Ask, validate, retry; ``first``: the first attempt's outcome when it was already asked (in a batch)."""
        json_schema = decoder_safe(schema.model_json_schema())
        prompt_tokens = completion_tokens = 0
        started = time.perf_counter() if started is None else started
        problem = last_text = ""
        attempts = 0
        overflow = False
        earlier_ms = 0.0  # time of answers asked before this call and handed on (a replay)
        for attempt in range(self.retries + 1):
            attempts += 1
            # A retry at temperature 0 would repeat the same answer; a little
            # randomness gives a degenerate answer a chance to come out right.
            try:
                if attempt == 0 and first is not None:
                    if isinstance(first, LLMOutputError):
                        raise first
                    raw = first
                else:
                    raw = self.backend.chat(
                        messages,
                        schema=json_schema,
                        max_tokens=max_tokens,
                        temperature=temperature if attempt == 0 else max(temperature, 0.6),
                    )
            except LLMOutputError as e:  # the backend could not read this answer
                problem, last_text = e.message, e.raw
                if isinstance(e, ContextOverflow):
                    overflow = True
                    break
                continue
            except ModelError:
                self._record(
                    stage, prompt_tokens, completion_tokens, (time.perf_counter() - started) * 1000 + earlier_ms, attempts, "failed"
                )
                raise
            last_text = raw.text
            earlier_ms += raw.ms or 0.0
            prompt_tokens += raw.prompt_tokens
            completion_tokens += raw.completion_tokens
            try:
                value = _validate(schema, raw.text)
            except ValidationError as e:
                problem = _short(e, raw.text)
                continue
            ms = (time.perf_counter() - started) * 1000 + earlier_ms
            self._record(stage, prompt_tokens, completion_tokens, ms, attempts, "ok")
            return Completion(value, prompt_tokens, completion_tokens, ms)
        ms = (time.perf_counter() - started) * 1000 + earlier_ms
        self._record(stage, prompt_tokens, completion_tokens, ms, attempts, "failed")
        failure = ContextOverflow if overflow else LLMOutputError
        raise failure(
            f"{stage.name}: model {self.model_id} gave no valid answer in {attempts} attempt{'s' if attempts != 1 else ''} ({problem})",
            raw=last_text,
        )

    def _record(self, stage: Stage, p: int, c: int, ms: float, attempts: int, outcome: str) -> None:
        self.log.calls.append(CallRecord(stage.name, self.model_id, p, c, round(ms, 1), attempts, outcome))


def _validate(schema: type[T], text: str) -> T:
    """Strict JSON first; then JSON with raw newlines or tabs inside strings.

    Grammar-constrained decoders let a model put a literal newline in a
    string (seen with Qwen2.5-1.5B writing a merged narrative). The content is
    fine; only strict JSON forbids it, so it is read leniently rather than
    thrown away.
    """
    try:
        return schema.model_validate_json(text)
    except ValidationError as strict_error:
        try:
            lenient = json.loads(text, strict=False)
        except ValueError:
            raise strict_error from None
        return schema.model_validate(lenient)


def _short(error: ValidationError, text: str) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "answer"
    snippet = text[:60].replace("\n", " ")
    return f"{where}: {first.get('msg', 'invalid')}; got {snippet!r}"
