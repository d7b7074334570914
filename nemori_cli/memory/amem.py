"""Management mode A-MEM: every memory becomes a note that links itself to its neighbours and evolves them.

For one new memory (a raw message with ``--memory amem``, a distilled fact
with ``--memory nemori+amem``):

1. **Note construction**: the model gives keywords, a one-sentence context and
   tags (constrained JSON). Unusable answers get deterministic attributes
   (the memory's own words as keywords), counted as a fallback.
2. The note's vector covers its content and every attribute.
3. **Link generation**: the ``neighbours`` nearest notes are offered by id;
   the model picks the ones to link. Links are stored both ways.
4. **Memory evolution**: the same answer may give up to two of those
   neighbours a new context and tags. Each change is written to the note,
   its full-text row and its vector at once, and recorded with the note that
   caused it. An unusable answer links the neighbours above a similarity
   floor and evolves nothing (a counted fallback).

The caller holds the transaction: the note, its links and the evolution are
one unit of work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from nemori_cli import stages
from nemori_cli.config import DEFAULT_NEIGHBOURS
from nemori_cli.dates import annotate_relative_times, format_date
from nemori_cli.domain import Fact, Note
from nemori_cli.embed.base import Embedder
from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.prompts import amem as prompt
from nemori_cli.store import notes as note_sql
from nemori_cli.store.contract import Store

CONSTRUCTION = stages.NOTE
LINKING = stages.LINKING

_WORD = re.compile(r"[A-Za-z][\w'-]+")
_SKIP = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "but",
        "so",
        "that",
        "this",
        "these",
        "those",
        "with",
        "from",
        "into",
        "about",
        "have",
        "has",
        "had",
        "was",
        "were",
        "will",
        "would",
        "could",
        "should",
        "been",
        "being",
        "just",
        "really",
        "very",
        "what",
        "when",
        "where",
        "which",
        "who",
        "how",
        "why",
        "you",
        "your",
        "yours",
        "our",
        "ours",
        "they",
        "them",
        "their",
        "there",
        "here",
        "then",
        "than",
        "also",
        "too",
        "not",
        "yes",
        "yeah",
        "okay",
        "ok",
        "hey",
        "hi",
        "hello",
        "thanks",
        "thank",
        "said",
        "says",
        "think",
        "know",
        "like",
        "going",
        "get",
        "got",
        "can",
        "are",
        "is",
        "it",
        "its",
        "it's",
        "i'm",
        "i've",
        "i'd",
        "me",
        "my",
        "mine",
        "we",
        "us",
        "he",
        "him",
        "his",
        "she",
        "her",
        "hers",
        "for",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
    ]
)


@dataclass(frozen=True)
class AmemSettings:
    neighbours: int = DEFAULT_NEIGHBOURS  # nearest notes offered to the link decision (A-MEM's k)
    link_floor: float = 0.55  # fallback: link neighbours at least this similar (cosine) when the answer is unusable
    # How many notes a search returns, and how many linked ones it adds, are
    # search options (retrieval/search.py: SearchOptions.notes, .linked).


@dataclass(frozen=True)
class NoteSource:
    """What a note is made from."""

    content: str
    timestamp: datetime
    message_id: int | None = None
    episode_id: int | None = None


def fallback_attributes(content: str, day: str) -> prompt.NoteAttributes:
    """Attributes without a model: the memory's distinctive words, names first."""
    words = [w for w in _WORD.findall(content) if w.lower() not in _SKIP]
    ranked = sorted(dict.fromkeys(words), key=lambda w: (not w[0].isupper(), -len(w)))
    return prompt.NoteAttributes(keywords=ranked[: prompt.MAX_KEYWORDS], context=f"A memory from {day}.", tags=[])


class Amem:
    """Builds notes for one run: construction, links, evolution."""

    def __init__(self, llm: StructuredLLM, embedder: Embedder, settings: AmemSettings = AmemSettings()):
        self.llm, self.embedder, self.settings = llm, embedder, settings

    def attributes(self, source: NoteSource) -> tuple[prompt.NoteAttributes, str]:
        """(attributes, origin): the model's, or the deterministic ones when its answer is unusable."""
        day = format_date(source.timestamp.date())
        try:
            value = self.llm.complete(prompt.render_attributes(source.content, day), schema=prompt.NoteAttributes, stage=CONSTRUCTION).value
        except LLMOutputError as e:
            self.llm.log.fallback(CONSTRUCTION, f"{e.message}; keywords taken from the memory's own words")
            return fallback_attributes(source.content, day), "fallback"
        keywords = prompt.drop_copied_example(value.keywords, source.content)
        tags = prompt.drop_copied_example(value.tags, source.content)
        if (keywords, tags) != (value.keywords, value.tags):
            self.llm.log.repaired(CONSTRUCTION, "dropped words copied from the prompt's example")
        if not keywords:
            keywords = fallback_attributes(source.content, day).keywords
            self.llm.log.repaired(CONSTRUCTION, "no keywords given; took the memory's own words")
        return value.model_copy(update={"keywords": keywords, "tags": tags}), "model"

    def plan(self, db: Store, user: str, source: NoteSource, attributes: tuple[prompt.NoteAttributes, str] | None = None) -> NotePlan:
        """Everything the model decides for a new note, without writing: safe to run before the write lock is taken."""
        attrs, origin = attributes or self.attributes(source)
        vector = self._vector(source.content, attrs.keywords, attrs.tags, attrs.context)
        found = note_sql.vector_search(db, user, vector, self.settings.neighbours)
        neighbours = note_sql.by_ids(db, user, [i for i, _ in found])
        ordered = [neighbours[i] for i, _ in found if i in neighbours]
        decision = self._decide(source, attrs, ordered, dict(found))
        return NotePlan(source, attrs, origin, vector, {n.id: n for n in ordered}, decision)

    def write(self, db: Store, user: str, plan: NotePlan) -> int:
        """Store a planned note, its links and its neighbours' evolution; returns its id. Caller holds the transaction.

        A neighbour deleted since the plan is skipped; one changed since keeps
        its change (the model decided on text that is no longer there).
        """
        attrs, source = plan.attributes, plan.source
        note_id = note_sql.add(
            db,
            user,
            content=source.content,
            ts=source.timestamp,
            keywords=attrs.keywords,
            tags=attrs.tags,
            context=attrs.context,
            embedding=plan.vector,
            origin=plan.origin,
            message_id=source.message_id,
            episode_id=source.episode_id,
        )
        now = note_sql.by_ids(db, user, list(plan.neighbours))
        linked = [other for other in plan.decision.links if other in now and note_sql.link(db, note_id, other, made_by=note_id)]
        evolved = []
        for update in plan.decision.updates:
            shown, current = plan.neighbours[update.id], now.get(update.id)
            if current is None or (current.context, current.tags) != (shown.context, shown.tags):
                continue
            tags = list(update.tags) or list(current.tags)  # no tags given: keep the ones it had
            vector_after = self._vector(current.content, current.keywords, tags, update.context)
            fields = note_sql.evolve(db, user, current, context=update.context, tags=tags, made_by=note_id, embedding=vector_after)
            if fields:
                evolved.append(f"N{update.id} ({', '.join(fields)})")
        if linked or evolved:
            self.llm.log.decision(
                LINKING,
                f"N{note_id}: linked to {', '.join(f'N{i}' for i in linked) or 'nothing'}; evolved {', '.join(evolved) or 'nothing'}",
            )
        return note_id

    def remember(self, db: Store, user: str, source: NoteSource, attributes: tuple[prompt.NoteAttributes, str] | None = None) -> int:
        """Plan and write one note at once (the caller holds the transaction throughout)."""
        return self.write(db, user, self.plan(db, user, source, attributes))

    def _vector(self, content: str, keywords, tags, context: str) -> np.ndarray:
        return self.embedder.embed_documents([note_sql.embedding_text(content, keywords, tags, context)])[0]

    def _decide(self, source: NoteSource, attrs: prompt.NoteAttributes, neighbours: list[Note], similarity: dict[int, float]) -> _Decision:
        """The model's links and updates, restricted to the offered notes; a similarity rule when it fails."""
        ids = tuple(n.id for n in neighbours)
        schema = prompt.decision_schema(ids) if ids else None
        if schema is None:
            return _Decision((), ())
        day = format_date(source.timestamp.date())
        try:
            value = self.llm.complete(prompt.render_links(source.content, day, attrs, neighbours), schema=schema, stage=LINKING).value
        except LLMOutputError as e:
            chosen = tuple(i for i in ids if similarity.get(i, 0.0) >= self.settings.link_floor)
            self.llm.log.fallback(
                LINKING, f"{e.message}; linked the {len(chosen)} neighbours with cosine >= {self.settings.link_floor}, evolved none"
            )
            return _Decision(chosen, ())
        links = tuple(dict.fromkeys(value.links))
        updates: list[prompt.NeighbourUpdate] = []
        seen: set[int] = set()
        by_id = {n.id: n for n in neighbours}
        for update in value.updates:
            if update.id in seen or len(update.context) < 8:
                continue  # one change per neighbour; an empty context would erase what it said
            if _restates(update.context, by_id[update.id].content) or _restates(update.context, source.content):
                continue  # a copy of a memory's own words describes nothing (a small model's habit)
            seen.add(update.id)
            updates.append(update)
        if len(updates) != len(value.updates):
            self.llm.log.repaired(
                LINKING, f"kept {len(updates)} of {len(value.updates)} neighbour updates (duplicates, empty contexts or copied memories)"
            )
        # An evolved neighbour is related by the model's own judgement: link it too.
        links = tuple(dict.fromkeys([*links, *(u.id for u in updates)]))
        return _Decision(links, tuple(updates))


def _normal(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def _restates(context: str, memory: str) -> bool:
    """Whether a proposed context is only a memory's text again (whole, or a piece of it)."""
    c = _normal(context)
    return bool(c) and c in _normal(memory)


@dataclass(frozen=True)
class _Decision:
    links: tuple[int, ...]
    updates: tuple[prompt.NeighbourUpdate, ...]


@dataclass(frozen=True)
class NotePlan:
    """A new note as decided before any write: its attributes, vector, the neighbours shown and the decision."""

    source: NoteSource
    attributes: prompt.NoteAttributes
    origin: str
    vector: np.ndarray
    neighbours: dict[int, Note]
    decision: _Decision


def evoke(db: Store, user: str, vector: np.ndarray, *, k: int, threshold: float) -> list[Fact]:
    """What notes already say about something, shaped as facts for the prediction step (--memory nemori+amem)."""
    hits = [(i, s) for i, s in note_sql.vector_search(db, user, vector, k) if s > threshold]
    found = note_sql.by_ids(db, user, [i for i, _ in hits])
    return [
        Fact(
            id=n.id,
            user=user,
            text=n.content,
            created_at=n.created_at,
            status="active",
            source_episode_ids=(n.episode_id,) if n.episode_id else (),
        )
        for n in (found[i] for i, _ in hits if i in found)
    ]


def message_content(speaker: str, content: str, timestamp: datetime) -> str:
    """A raw message as a note's content: who said it, relative times given their dates."""
    return f"{speaker}: {annotate_relative_times(content, timestamp)}"
