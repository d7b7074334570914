"""P_sel and P_int: does a new episode continue an earlier one, and if so, one merged episode.

The choice is asked one candidate at a time as a yes/no question, most similar
first, and the first yes wins. We first asked the paper's form (pick one id
of the candidates, or -1, constrained to those ids): the 0.5B model picked
whichever candidate was listed last, and the 1.5B model answered -1 to a
plain continuation (docs/CONSOLIDATION.md has the probe). Asked about one
pair, the 1.5B model is right on 5 of 6 cases. The merged episode uses the
narrative's answer model under another name, so logs and tests can tell the
two calls apart.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from nemori_cli.prompts.narrative import Narrative
from nemori_cli.prompts.render import clip, when

SELECT_SYSTEM = (
    "You maintain a person's episodic memory. Decide whether a NEW episode continues an "
    "EARLIER episode: the same trip, plan, project or event, picked up again later. "
    "Sharing people or a general topic is not enough. Answer with JSON only."
)

MERGE_SYSTEM = (
    "You merge two episodic memories of one continuing event into one. Write a short title "
    "and a third-person narrative that keeps every concrete detail of both (names, places, "
    "numbers, plans, feelings) and every absolute date, in time order. Do not invent "
    "anything. Answer with JSON only."
)

# Fixed cases with known answers, asked once per run before any real question:
# (earlier title, earlier narrative, new title, new narrative, continues?).
SELF_CHECK = (
    (
        "Ann and Bob plan their Lisbon trip",
        "Ann and Bob booked flights to Lisbon for 12 May 2024 and started looking at hotels.",
        "Ann and Bob pick a Lisbon hotel",
        "Ann and Bob went on planning their Lisbon trip and chose a small hotel in Alfama for 12 May 2024.",
        True,
    ),
    (
        "Ann and Bob plan their Lisbon trip",
        "Ann and Bob booked flights to Lisbon for 12 May 2024 and started looking at hotels.",
        "Sam's new running shoes",
        "Sam told Jo that he bought new trail running shoes and ran 10 km on Sunday.",
        False,
    ),
)
CHECK_DATE = datetime(2024, 5, 2)


class Continuation(BaseModel):
    same_event: bool = Field(description="true if the new episode continues the earlier one")


class MergedEpisode(Narrative):
    """Same fields and limits as a narrative; a distinct name for logs and tests."""


def _episode_line(title: str, narrative: str, start: datetime) -> str:
    return f"({when(start)}) {title}: {clip(narrative, 420)}"


def render_pair(earlier: tuple[str, str, datetime], new: tuple[str, str, datetime]) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SELECT_SYSTEM},
        {
            "role": "user",
            "content": f"EARLIER episode: {_episode_line(*earlier)}\nNEW episode: {_episode_line(*new)}\n\n"
            "Does the new episode continue the earlier one?",
        },
    ]


def render_merge(
    old_title: str, old_narrative: str, old_start: datetime, title: str, narrative: str, start: datetime
) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": MERGE_SYSTEM},
        {
            "role": "user",
            "content": f"Earlier part:\n{_episode_line(old_title, old_narrative, old_start)}\n\n"
            f"Later part:\n{_episode_line(title, narrative, start)}\n\nWrite the merged title and narrative.",
        },
    ]
