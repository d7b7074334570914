"""A fact as a pointer: the raw turn it was distilled from takes its place in the ranking.

A fact is a dense, well-worded index entry ("Evan's family motto is 'Bring it
on Home'") that a question finds more easily than the chat line behind it; but
written by a 0.5B model it can be wrong, and shown as text it takes a found
turn's place in a short context (docs/BEYOND.md, fifth round). Shown as the
turn it came from, with that turn's neighbours, the reader sees what was said
and who said it, and the fact only decides what is shown (``facts_as="turn"``).
Or it only votes (``facts_as="rank"``): the turns the facts point at join the
raw turns' fusion as a third ranked list (retrieval/search.py), so a turn both
a fact and the question's words lead to rises, and nothing else is shown. Both
are off on `ask`'s roads: with the 0.5B model's facts the pointers cost points
and the vote found less of the evidence (docs/BEYOND.md, sixth and seventh rounds).

A fact records the episodes it came from, not the turn: the turn is the one of
those episodes' messages that shares the most of the fact's words.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime

from nemori_cli.domain import Hit, Message, to_epoch
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import message_index
from nemori_cli.store import messages as message_sql
from nemori_cli.store.contract import Store

_WORD = re.compile(r"[A-Za-z0-9']{3,}")
_STEM = 5  # words compared by their first five letters: "family" and "families" meet at "famil"
_COMMON = frozenset(
    {"the", "and", "for", "with", "that", "this", "was", "were", "has", "have", "had", "his", "her", "their", "they", "she"}
)


def _stems(text: str) -> set[str]:
    return {w.lower()[:_STEM] for w in _WORD.findall(text) if w.lower() not in _COMMON}


def source_turn(fact_text: str, messages: list[Message]) -> Message | None:
    """The message that shares the most of the fact's words (its speaker's name counts too); None when none shares
    a word of what was said (a name alone points at every line that person said).

    On a tie the earlier message: a fact is first said, then talked about.
    """
    wanted = _stems(fact_text)
    best: tuple[int, Message] | None = None
    for m in messages:
        said = wanted & _stems(m.content)
        overlap = len(said | (wanted & _stems(m.speaker)))
        if said and (best is None or overlap > best[0]):
            best = (overlap, m)
    return best[1] if best else None


def pointed(db: Store, user: str, facts: list[Hit], as_of: datetime | None = None) -> list[tuple[Hit, Message]]:
    """Each fact with the turn it points at, best fact first, each turn once (with the best of its facts).

    A fact whose episodes hold no message sharing its words points at nothing
    and is dropped; a turn said after ``as_of`` is not pointed at.
    """
    stored = fact_sql.by_ids(db, user, [h.id for h in facts])
    owned = message_sql.of_episodes(db, user, sorted({e for f in stored.values() for e in f.source_episode_ids}))
    chosen: dict[int, tuple[Hit, Message]] = {}
    for hit in facts:
        fact = stored.get(hit.id)
        if fact is None:
            continue
        candidates = [
            m for e in fact.source_episode_ids for m in owned.get(e, []) if as_of is None or to_epoch(m.timestamp) <= to_epoch(as_of)
        ]
        turn = source_turn(fact.text, candidates)
        if turn is not None and (turn.id not in chosen or hit.score > chosen[turn.id][0].score):
            chosen[turn.id] = (hit, turn)
    return sorted(chosen.values(), key=lambda pair: -pair[0].score)


def as_turns(db: Store, user: str, facts: list[Hit], turns: list[Hit], neighbours: int, as_of: datetime | None = None) -> list[Hit]:
    """``turns`` with each fact's source turn added at the fact's score (a turn found both ways keeps the better score).

    Best first is left to the caller's budget.
    """
    by_turn = {h.id: h for h in turns}
    added_from: list[tuple[Hit, Message]] = []
    for hit, turn in pointed(db, user, facts, as_of):
        if turn.id in by_turn:
            if hit.score > by_turn[turn.id].score:
                by_turn[turn.id] = replace(by_turn[turn.id], score=hit.score)
        else:
            added_from.append((hit, turn))
    context = message_index.around(db, user, [m for _h, m in added_from], neighbours, as_of=as_of)
    added = [
        Hit(
            kind="message",
            id=m.id,
            score=h.score,
            title=m.speaker,
            text=m.content,
            start=m.timestamp,
            end=m.timestamp,
            vector_rank=h.vector_rank,
            text_rank=h.text_rank,
            similarity=h.similarity,
            messages=tuple(context.get(m.id, [m])),
        )
        for h, m in added_from
    ]
    return [*by_turn.values(), *added]
