"""A scripted LLM for unit tests: a queue of canned answers and a history of prompts."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from nemori_cli.llm.base import ChatMessages, RawCompletion

Answer = str | dict | Callable[[ChatMessages, dict], str | dict]


@dataclass
class FakeBackend:
    """Answers from ``responses`` in order; a callable answer sees the prompt and schema.

    When the queue is empty, ``default`` (if given) answers every further call;
    otherwise the test is told that the code made more calls than it scripted.
    """

    responses: list[Answer] = field(default_factory=list)
    default: Answer | None = None
    model_id: str = "fake"
    history: list[tuple[ChatMessages, dict]] = field(default_factory=list)

    def chat(self, messages: ChatMessages, *, schema: dict, max_tokens: int, temperature: float) -> RawCompletion:
        self.history.append((messages, schema))
        if self.responses:
            answer = self.responses.pop(0)
        elif self.default is not None:
            answer = self.default
        else:
            raise AssertionError(f"FakeBackend: unscripted call #{len(self.history)} ({schema.get('title')})")
        if callable(answer):
            answer = answer(messages, schema)
        text = answer if isinstance(answer, str) else json.dumps(answer)
        prompt_tokens = sum(len(m["content"].split()) for m in messages)
        return RawCompletion(text, prompt_tokens, len(text.split()))

    def prompts_for(self, title: str) -> list[ChatMessages]:
        """The prompts sent with one response schema (by its title)."""
        return [m for m, s in self.history if s.get("title") == title]
