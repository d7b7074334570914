"""A-MEM's two model steps: a new note's attributes, then its links and the neighbours' evolution.

Neighbours are shown and answered by their real note ids, and the answer's
schema only admits the ids that were offered: a link or an update can never
land on a note the model was not shown (the public implementation stored
list positions, so evolution edited the wrong notes once anything moved).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints, create_model, field_validator

from nemori_cli.dates import format_date
from nemori_cli.domain import Note
from nemori_cli.prompts.render import clip
from nemori_cli.stages import MESSAGE_CHARS_READ

KEYWORD_MAX = 32  # characters; short enough that the grammar keeps the bound
TAG_MAX = 24
CONTEXT_MAX = 200
MAX_KEYWORDS = 5
MAX_TAGS = 3
MAX_UPDATES = 2  # neighbours one new note may evolve: each costs a sentence of output


# Item bounds short enough to reach the grammar (llm/schema.py keeps them), so
# a keyword cannot run on; the validators clip first, for endpoints that do
# not enforce the schema.
Keyword = Annotated[str, StringConstraints(max_length=KEYWORD_MAX)]
Tag = Annotated[str, StringConstraints(max_length=TAG_MAX)]


def _clean_words(values: list[str], limit: int, count: int, *, lower: bool = False) -> list[str]:
    """Clipped, stripped, empty ones dropped, each once whatever its case (the first spelling kept)."""
    if not isinstance(values, list):
        return values  # let the schema say what is wrong
    seen: dict[str, str] = {}
    for v in values:
        word = clip(str(v), limit).strip(" .,;:")
        if word:
            seen.setdefault(word.lower(), word.lower() if lower else word)
    return list(seen.values())[:count]


ATTRIBUTES_SYSTEM = (
    "You label one memory of a conversation for later search. Give up to five keywords "
    "(the names, places, things and actions it mentions), one sentence of context (what "
    "it is about and why it matters, naming the person), and up to three short topic "
    "tags. Use only what the memory says. Answer with JSON only.\n\n"
    "Example. Memory (4 June 2023): Mia: I started a new job at Acme in Leeds last Monday.\n"
    'Answer: {"keywords": ["Mia", "new job", "Acme", "Leeds"], "context": "Mia tells a friend '
    'about starting a new job at Acme in Leeds.", "tags": ["work", "career"]}'
)


class NoteAttributes(BaseModel):
    keywords: list[Keyword] = Field(
        default_factory=list, max_length=MAX_KEYWORDS, description="Names, places, things and actions the memory mentions."
    )
    context: str = Field(min_length=1, description="One sentence: what the memory is about, naming the person.")
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS, description="Short topic tags.")

    @field_validator("keywords", mode="before")
    @classmethod
    def _keywords(cls, values: list[str]) -> list[str]:
        return _clean_words(values, KEYWORD_MAX, MAX_KEYWORDS)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, values: list[str]) -> list[str]:
        return _clean_words(values, TAG_MAX, MAX_TAGS, lower=True)

    @field_validator("context")
    @classmethod
    def _context(cls, value: str) -> str:
        value = clip(value, CONTEXT_MAX)
        if len(value) < 8:
            raise ValueError("context is too short to say anything")
        return value


# Words of the worked example: a small model copies them into unrelated notes
# ("work, career" on a greeting), so they are kept only where the memory itself says them.
EXAMPLE_WORDS = frozenset({"mia", "new job", "acme", "leeds", "work", "career"})


def drop_copied_example(values: list[str], content: str) -> list[str]:
    text = content.lower()
    return [v for v in values if v.lower() not in EXAMPLE_WORDS or v.lower() in text]


def render_attributes(content: str, day: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": ATTRIBUTES_SYSTEM},
        {"role": "user", "content": f"Memory ({day}): {clip(content, MESSAGE_CHARS_READ)}"},
    ]


LINK_SYSTEM = (
    "You organise memories. A new memory has arrived; nearby memories are listed with their "
    "ids. 1) links: the ids of nearby memories about the same person, event, plan or thing "
    "as the new one. 2) updates: for at most two of the linked memories whose context should "
    "now mention what the new memory adds, their id with a new one-sentence context and tags. "
    "Leave updates empty when nothing needs to change. Use only the ids listed. Answer with "
    "JSON only."
)


class NeighbourUpdate(BaseModel):
    """What every update holds, for the type checker; decision_schema narrows the id to those offered."""

    id: int
    context: str
    tags: list[str]


class LinkDecision(BaseModel):
    links: list[int]
    updates: list[NeighbourUpdate]


@lru_cache(maxsize=256)
def decision_schema(ids: tuple[int, ...]) -> type[LinkDecision]:
    """The answer for one set of offered neighbours: only their ids are valid anywhere in it."""
    offered = Literal[ids]  # type: ignore[valid-type]  # a Literal made at run time: no static type says it
    update = create_model(
        "NeighbourUpdate",
        __base__=NeighbourUpdate,
        __validators__={
            "clip_context": field_validator("context")(lambda cls, v: clip(strip_tag_list(v), CONTEXT_MAX)),
            "clean_tags": field_validator("tags", mode="before")(lambda cls, v: _clean_words(v, TAG_MAX, MAX_TAGS, lower=True)),
        },
        id=(offered, Field(description="Id of the nearby memory to update.")),
        context=(str, Field(min_length=1, description="Its new one-sentence context.")),
        tags=(list[Tag], Field(default_factory=list, max_length=MAX_TAGS, description="Its new tags.")),
    )
    return create_model(
        "LinkDecision",
        __base__=LinkDecision,
        links=(list[offered], Field(default_factory=list, max_length=len(ids), description="Ids of nearby memories to link to.")),
        updates=(
            list[update],  # type: ignore[valid-type]  # a model made at run time
            Field(default_factory=list, max_length=MAX_UPDATES, description="Nearby memories whose context and tags change."),
        ),
    )


def _line(note: Note) -> str:
    tags = ", ".join(note.tags) or "-"
    return f"[{note.id}] ({format_date(note.timestamp.date())}) {clip(note.content, 220)}\n    context: {note.context}\n    tags: {tags}"


_TAGS_IN_CONTEXT = re.compile(r"(\s*[|;]|\n)\s*tags?\s*:.*$", re.IGNORECASE | re.DOTALL)


def strip_tag_list(context: str) -> str:
    """A context without a "tags: ..." tail (Qwen2.5-1.5B copies the listing's layout into the sentence)."""
    return _TAGS_IN_CONTEXT.sub("", context).strip()


def render_links(content: str, day: str, attributes: NoteAttributes, neighbours: list[Note]) -> list[dict[str, str]]:
    listed = "\n".join(_line(n) for n in neighbours)
    new = f"({day}) {clip(content, 400)}\n    context: {attributes.context}\n    tags: {', '.join(attributes.tags) or '-'}"
    return [
        {"role": "system", "content": LINK_SYSTEM},
        {"role": "user", "content": f"New memory:\n{new}\n\nNearby memories:\n{listed}\n\nWhich ids to link, and which to update?"},
    ]
