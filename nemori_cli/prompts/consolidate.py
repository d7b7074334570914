"""P_con, asked one pair at a time: does a newer fact make an older one outdated?

We first asked for the paper's three-way answer in one call (new, merge with
targets and text, or conflict with targets). Both local models failed it on
plain cases (measured, see docs/CONSOLIDATION.md): Qwen2.5-0.5B answered
"same" for everything, the 1.5B model named wrong targets. A yes/no question
about one pair is the question a small model can answer, and a strong model
answers it as well; near-duplicates are merged by the pipeline itself.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from nemori_cli.prompts.render import clip

SYSTEM = (
    "You check a memory for outdated facts. Given an OLDER fact and a NEWER fact about a "
    "person, decide whether the newer fact makes the older one false or outdated, for "
    "example because the person moved to another place, changed jobs, or a relationship "
    "changed. If both facts can still be true at the same time, the answer is false. "
    "Answer with JSON only."
)

# Two fixed pairs with known answers: a model that gets either wrong cannot be
# trusted to retire facts (the 0.5B model answers true to everything).
SELF_CHECK = (
    ("Sam works as a nurse in Leeds.", "Sam quit nursing and now works as a pilot.", True),
    ("Sam works as a nurse in Leeds.", "Sam has a dog called Rex.", False),
)


class Outdated(BaseModel):
    outdated: bool = Field(description="true if the newer fact makes the older one false or outdated")


def render(older: str, newer: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f"OLDER fact: {clip(older, 300)}\nNEWER fact: {clip(newer, 300)}\n\nDoes the newer fact make the older one outdated?",
        },
    ]
