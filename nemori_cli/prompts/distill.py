"""P_dis: keep as facts only what the messages hold that the prediction missed or got wrong."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from nemori_cli.dates import format_date
from nemori_cli.domain import Message
from nemori_cli.prompts.render import clip, message_lines

FACT_MAX = 240
MAX_FACTS = 8

# One worked example: small models copy its shape (third person, the name in
# every fact, places kept, dates absolute), which no instruction achieves alone.
EXAMPLE = (
    "Example. Conversation of 4 June 2023:\n"
    "(10:00) Mia: I started a new job at Acme in Leeds last Monday [29 May 2023].\n"
    "(10:01) Raj: Nice! Do you like it?\n"
    "(10:02) Mia: Yes, my team is great. I live in Leeds now.\n"
    'Answer: {"facts": ["Mia started a new job at Acme on 29 May 2023.", "Mia lives in Leeds.", "Mia likes her team at Acme."]}'
)

SYSTEM = (
    "You extract durable facts about people from a conversation: who they are, where they "
    "live and work, what they did or plan, when, with whom, what they like or own. Each "
    "fact is one short, self-contained sentence in the third person that names the person, "
    "keeps the names of places and things as written, and, for events, gives the absolute "
    "date (relative times come with their date in square brackets). Keep only facts that "
    "the expectation below does not already state or that contradict it. Skip greetings "
    "and small talk. Answer with JSON only.\n\n" + EXAMPLE
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
    "You extract durable facts about people from a conversation: who they are, where they "
    "live and work, what they did or plan, when, with whom, what they like or own. Each "
    "fact is one short, self-contained sentence in the third person that names the person, "
    "keeps the names of places and things as written, and, for events, gives the absolute "
    "date (relative times come with their date in square brackets). Skip greetings and "
    "small talk. Answer with JSON only.\n\n" + EXAMPLE
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
