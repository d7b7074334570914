"""P_dis: keep as facts only what the messages hold that the prediction missed or got wrong."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from nemori_cli.domain import Message
from nemori_cli.pipeline.timeexpr import format_date
from nemori_cli.prompts.render import clip, message_lines

FACT_MAX = 240
MAX_FACTS = 8

SYSTEM = (
    "You extract durable facts about people from a conversation: who they are, what they "
    "did or plan, when, where, with whom, what they like or own. Each fact is one short, "
    "self-contained sentence that names the person and, for events, the absolute date "
    "(relative times come with their date in square brackets). Keep only facts that the "
    "expectation below does not already state or that contradict it. Skip greetings and "
    "small talk. Answer with JSON only."
)


class Distilled(BaseModel):
    facts: list[str] = Field(
        default_factory=list,
        max_length=MAX_FACTS,
        description="New facts, one sentence each; empty when the conversation adds nothing new.",
    )

    @field_validator("facts")
    @classmethod
    def _clean(cls, values: list[str]) -> list[str]:
        cleaned = [clip(v, FACT_MAX) for v in values if len(v.strip()) >= 12]
        return list(dict.fromkeys(cleaned))


DIRECT_SYSTEM = (
    "You extract durable facts about people from a conversation: who they are, what they "
    "did or plan, when, where, with whom, what they like or own. Each fact is one short, "
    "self-contained sentence that names the person and, for events, the absolute date "
    "(relative times come with their date in square brackets). Skip greetings and small "
    "talk. Answer with JSON only."
)


def render(messages: list[Message], prediction: str | None, *, direct: bool = False) -> list[dict[str, str]]:
    """The prediction-error prompt, or with ``direct`` the plain extraction of the "Nemori-s" ablation."""
    day = format_date(messages[0].timestamp.date())
    if direct:
        return [
            {"role": "system", "content": DIRECT_SYSTEM},
            {"role": "user", "content": f"Conversation of {day}:\n{message_lines(messages, numbered=False)}\n\nWhich facts does it state?"},
        ]
    expected = prediction or "(nothing: memory knows nothing related yet)"
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f"Conversation of {day}:\n{message_lines(messages, numbered=False)}\n\n"
            f"Expectation:\n{expected}\n\nWhich facts are new?",
        },
    ]
