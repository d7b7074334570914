"""P_sel and P_int: does a new episode continue an earlier one, and if so, one merged episode.

The choice is constrained by the grammar to the candidates' ids or -1, so the
model cannot name an episode it was not shown. The merged episode uses the
narrative's own answer model under another name, so logs and tests can tell
the two calls apart.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field, create_model

from nemori_cli.domain import Episode
from nemori_cli.prompts.narrative import Narrative
from nemori_cli.prompts.render import clip, when

NONE = -1

SELECT_SYSTEM = (
    "You maintain a person's episodic memory. Decide whether a NEW episode is the direct "
    "continuation of one EARLIER episode: the same event or the same conversation thread, "
    "picked up again. Sharing people or a general topic is not enough. Most new episodes "
    "continue nothing: then answer -1. Answer with JSON only."
)

MERGE_SYSTEM = (
    "You merge two episodic memories of one continuing event into one. Write a short title "
    "and a third-person narrative that keeps every concrete detail of both (names, places, "
    "numbers, plans, feelings) and every absolute date, in time order. Do not invent "
    "anything. Answer with JSON only."
)


@lru_cache(maxsize=64)
def choice_schema(ids: tuple[int, ...]) -> type[BaseModel]:
    choice = Literal[(NONE, *ids)]  # type: ignore[valid-type]
    return create_model(
        "Continuation",
        continues=(choice, Field(description="Id of the earlier episode the new one continues, or -1 for none.")),
    )


class MergedEpisode(Narrative):
    """Same fields and limits as a narrative; a distinct name for logs and tests."""


def _episode_line(title: str, narrative: str, start) -> str:
    return f"({when(start)}) {title}: {clip(narrative, 420)}"


def render_choice(title: str, narrative: str, start, candidates: list[Episode]) -> list[dict[str, str]]:
    earlier = "\n".join(f"[{e.id}] {_episode_line(e.title, e.narrative, e.start)}" for e in candidates)
    return [
        {"role": "system", "content": SELECT_SYSTEM},
        {
            "role": "user",
            "content": f"EARLIER episodes:\n{earlier}\n\nNEW episode:\n{_episode_line(title, narrative, start)}\n\n"
            "Which earlier episode does the new one continue (-1 for none)?",
        },
    ]


def render_merge(old: Episode, title: str, narrative: str, start) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": MERGE_SYSTEM},
        {
            "role": "user",
            "content": f"Earlier part:\n{_episode_line(old.title, old.narrative, old.start)}\n\n"
            f"Later part:\n{_episode_line(title, narrative, start)}\n\nWrite the merged title and narrative.",
        },
    ]
