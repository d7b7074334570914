"""P_con: is a new fact new, the same as known facts (merge), or does it make some untrue (conflict)?

Targets are constrained to the ids shown. The merged sentence is optional in
the schema so that a `new` decision costs a handful of tokens.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field, create_model, field_validator

from nemori_cli.domain import Fact
from nemori_cli.prompts.render import clip

MERGED_MAX = 240

SYSTEM = (
    "You keep a person's memory of facts consistent. Compare a NEW fact with KNOWN facts. "
    "Answer 'new' when the new fact adds information that no known fact has. Answer "
    "'merge' when it says the same thing as some known facts or completes them; give "
    "their ids and one sentence that combines them. Answer 'conflict' when it shows that "
    "some known facts are no longer true (a change, such as a move, a new job or a "
    "breakup, or a correction); give the ids of the facts it replaces. Answer with JSON only."
)


@lru_cache(maxsize=64)
def schema_for(ids: tuple[int, ...]) -> type[BaseModel]:
    target = Literal[ids]  # type: ignore[valid-type]
    return create_model(
        "Consolidation",
        __validators__={"clip_merged": field_validator("merged")(lambda cls, v: clip(v, MERGED_MAX))},
        action=(Literal["new", "merge", "conflict"], Field(description="new, merge or conflict.")),
        targets=(
            list[target],  # type: ignore[valid-type]
            Field(default_factory=list, max_length=len(ids), description="Ids of the known facts merged or replaced."),
        ),
        merged=(str, Field(default="", description="For merge only: one sentence combining them.")),
    )


def render(new_fact: str, known: list[Fact]) -> list[dict[str, str]]:
    lines = "\n".join(f"[{f.id}] {clip(f.text, 300)}" for f in known)
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"KNOWN facts:\n{lines}\n\nNEW fact: {new_fact}\n\nnew, merge or conflict?"},
    ]
