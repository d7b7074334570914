"""A small scripted world for the memory-management tests: messages on a subject, and a fake model.

Narratives echo the messages (so the bag-of-words embedder makes episodes on
one subject similar and episodes on different subjects dissimilar); every
other stage answers from a per-schema table that a test fills in.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from nemori_cli.domain import IncomingMessage


def chat(subject_words: list[str], *, start: datetime, n: int = 4, tag: str = "") -> list[IncomingMessage]:
    """n messages on one subject, a minute apart; ids are unique per start time."""
    return [
        IncomingMessage(
            speaker="Ann" if i % 2 == 0 else "Bob",
            content=" ".join(subject_words) + f" {tag}".rstrip(),
            timestamp=start + timedelta(minutes=i),
            source_id=f"{start:%Y%m%d%H%M}-{i}",
        )
        for i in range(n)
    ]


class World:
    """backend.default for a FakeBackend: answers by schema title; `answers[title]` overrides."""

    def __init__(self, backend, **answers):
        self.answers = {
            "Partition": {"boundaries": []},
            "Continuation": {"same_event": False},
            "Prediction": {"prediction": "Ann and Bob talked."},
        }
        self.answers.update(answers)
        self.facts: list[list[str]] = []
        self.passes_continuation_check = True
        backend.default = self

    def __call__(self, messages, schema):
        title = schema["title"]
        if title == "Narrative":
            said = messages[-1]["content"].split(":\n", 1)[1].split("\n\nWrite")[0]
            words = " ".join(line.split(": ", 1)[1] for line in said.splitlines() if ": " in line)
            return {"title": words[:40], "narrative": f"On 8 May 2023 Ann and Bob said: {words}"}
        if title == "Continuation" and is_self_check(messages):
            return self._continuation_check(messages[-1]["content"])
        if title == "Distilled":
            return {"facts": self.facts.pop(0) if self.facts else []}
        answer = self.answers.get(title)
        if answer is None:
            raise AssertionError(f"unscripted {title}")
        return answer(messages, schema) if callable(answer) else answer

    def _continuation_check(self, text: str) -> dict:
        """The integration self-check's fixed cases: right, or (to test the guard) always yes."""
        if not self.passes_continuation_check:
            return {"same_event": True}
        return {"same_event": "Lisbon" in text.split("NEW episode:")[1]}


def is_self_check(messages) -> bool:
    return "Ann and Bob booked flights to Lisbon" in messages[-1]["content"]


def real_prompts(backend, title: str):
    """Prompts of one schema, the self-check's fixed cases left out."""
    return [p for p in backend.prompts_for(title) if not is_self_check(p)]
