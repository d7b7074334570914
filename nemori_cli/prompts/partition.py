"""P_par: where does a new episode start inside a window of messages?

We ask for something a 0.5B model can do: the numbers of the messages that
start a new topic, each constrained by the grammar to a valid position, with a
bounded count. The grammar cannot express "unique" or "ascending", so the
pipeline repairs the answer (see pipeline/partition.py).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field, create_model

from nemori_cli.domain import Message
from nemori_cli.prompts.render import message_lines

SYSTEM = (
    "You segment a chat log into episodes. An episode is a run of consecutive messages "
    "about one topic, event or activity. A new episode starts where the conversation "
    "clearly turns to a different subject, or after a long pause. Messages on the same "
    "subject stay together even when the speakers change. Most windows hold one to three "
    "episodes. Answer with JSON only."
)


class PartitionAnswer(BaseModel):
    """What every window's answer holds, for the type checker; schema_for narrows it to the window."""

    boundaries: list[int]


@lru_cache(maxsize=64)
def schema_for(n: int, max_boundaries: int) -> type[PartitionAnswer]:
    """The answer model for a window of ``n`` messages."""
    position = Literal[tuple(range(2, n + 1))] if n >= 2 else int
    return create_model(
        "Partition",
        __base__=PartitionAnswer,
        boundaries=(
            list[position],  # type: ignore[valid-type]  # a Literal made at run time: no static type says it
            Field(
                default_factory=list,
                max_length=max_boundaries,
                description="Numbers of the messages that each START a new episode, in ascending order. "
                "Empty when all messages form one episode.",
            ),
        ),
    )


def render(messages: list[Message]) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f"Messages 1 to {len(messages)}:\n{message_lines(messages, numbered=True, limit=240)}\n\n"
            "Which messages start a new episode?",
        },
    ]
