"""The flat running summary (management mode `summary`): fold one episode into it."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from nemori_cli.prompts.render import clip, when

SUMMARY_MAX = 2400

SYSTEM = (
    "You keep one running summary of everything known about the people in a chat history. "
    "Rewrite the summary so that it also covers the new episode: keep every earlier fact "
    "that is still true, add what is new with its absolute date, replace what changed. "
    "Plain sentences, at most about 250 words. Answer with JSON only."
)


class Summary(BaseModel):
    summary: str = Field(min_length=10, description="The whole updated summary.")

    @field_validator("summary")
    @classmethod
    def _clip(cls, value: str) -> str:
        return clip(value, SUMMARY_MAX)


def render(current: str | None, title: str, narrative: str, start) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f"Summary so far:\n{current or '(empty)'}\n\nNew episode ({when(start)}) {title}: {clip(narrative, 900)}\n\n"
            "Write the updated summary.",
        },
    ]
