"""P_ant: from an episode's title and what memory already knows, predict what it contained."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from nemori_cli.domain import Fact
from nemori_cli.prompts.render import clip

PREDICTION_MAX = 800

SYSTEM = (
    "You anticipate what a conversation probably contained, using only a short title and "
    "facts already known about the people in it. Write what you expect was said, as plain "
    "statements. Do not invent specific new details. Answer with JSON only."
)


class Prediction(BaseModel):
    prediction: str = Field(min_length=1, description="What the conversation probably contained, in a few plain sentences.")

    @field_validator("prediction")
    @classmethod
    def _clip(cls, value: str) -> str:
        return clip(value, PREDICTION_MAX)


def render(title: str, known: list[Fact]) -> list[dict[str, str]]:
    facts = "\n".join(f"- {f.text}" for f in known)
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Known facts:\n{facts}\n\nTitle of the conversation: {title}\n\nWhat did it probably contain?"},
    ]
