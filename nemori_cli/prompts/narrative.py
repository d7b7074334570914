"""P_nar: a group of messages becomes a titled third-person narrative with absolute dates."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from nemori_cli.dates import format_date
from nemori_cli.domain import Message
from nemori_cli.prompts.render import clip, message_lines

TITLE_MAX = 90
NARRATIVE_MAX = 1200

SYSTEM = (
    "You write episodic memories from chat logs. Given some messages, write a short title "
    "and a factual third-person narrative of what was said. Name the people. Keep every "
    "concrete detail: names, places, numbers, plans, feelings, dates. Relative times such "
    "as 'yesterday' come with the absolute date in square brackets; write the absolute "
    "date, never the relative word. Do not invent anything that the messages do not say. "
    "Answer with JSON only."
)


class Narrative(BaseModel):
    title: str = Field(
        min_length=3,
        description="A few words naming who and what, searchable later.",
    )
    narrative: str = Field(
        min_length=10,
        description="Two to five plain sentences, third person, past tense, with absolute dates.",
    )

    @field_validator("title")
    @classmethod
    def _clip_title(cls, value: str) -> str:
        return clip(value, TITLE_MAX)

    @field_validator("narrative")
    @classmethod
    def _clip_narrative(cls, value: str) -> str:
        return clip(value, NARRATIVE_MAX)


def render(messages: list[Message]) -> list[dict[str, str]]:
    first = messages[0].timestamp
    people = ", ".join(dict.fromkeys(m.speaker for m in messages))
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f"Conversation of {format_date(first.date())} between {people}:\n"
            f"{message_lines(messages, numbered=False)}\n\nWrite the title and narrative.",
        },
    ]
