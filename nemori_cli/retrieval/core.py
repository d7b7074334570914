"""The core context: one user's current facts and most recent raw timeline, the same for every question.

Reading a whole chat beat retrieval on histories that fit the window, and ten
times faster, because its prompt is one prefix whose KV cache is computed once
(docs/ANSWERS.md). The core is built the same way: the answer instructions,
the current facts (superseded ones left out, the newest kept if they are too
many), then as many of the most recent turns as fit ``budget`` tokens. When
the whole history fits, the core is the whole history and nothing needs to be
retrieved. Otherwise retrieval adds only what the core does not show (older
turns and facts), after the core, where it costs the cache nothing.

The core is a pure function of the memory (and of ``as_of``): it is not
stored, so it can never be stale; its digest names the KV state saved for it
(retrieval/core_cache.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from nemori_cli.domain import Hit, Message, to_epoch
from nemori_cli.prompts import core as core_prompt
from nemori_cli.prompts.timeline import estimate_tokens, lines_of
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import messages as message_sql
from nemori_cli.store.db import Database

FACT_SHARE = 0.25  # at most this share of the core's budget goes to facts; the rest to raw turns
MIN_LINE_TOKENS = 6  # the least a timeline line costs: how many turns to read for a budget
COUNT_SLACK = 1.02  # lines are counted one by one; their sum can differ a little from the joined text's


@dataclass(frozen=True)
class Core:
    text: str  # the user-message part that every question shares; ends with a newline
    facts: tuple[Hit, ...]
    turns: tuple[Hit, ...]  # one message hit per raw turn, oldest first
    complete: bool  # every message of the user (by ``as_of``) is in it
    all_facts: bool  # every current fact is in it
    tokens: int  # as counted when it was built

    @property
    def prefix(self) -> list[dict[str, str]]:
        return core_prompt.prefix(self.text)

    @property
    def digest(self) -> str:
        """What the core says, system message included: a saved KV state is used only for the same digest."""
        body = "\x1e".join(f"{m['role']}\x1f{m['content']}" for m in self.prefix)
        return hashlib.sha256(body.encode("utf-8")).hexdigest()

    @property
    def message_ids(self) -> frozenset[int]:
        return frozenset(h.id for h in self.turns)

    @property
    def fact_ids(self) -> frozenset[int]:
        return frozenset(h.id for h in self.facts)

    @property
    def holds_everything(self) -> bool:
        return self.complete and self.all_facts


def turn_hit(m: Message) -> Hit:
    return Hit(kind="message", id=m.id, score=0.0, title=m.speaker, text=m.content, start=m.timestamp, end=m.timestamp, messages=(m,))


def _line_cost(hit: Hit, count: Callable[[str], int]) -> int:
    return sum(count(line.text) + 2 for line in lines_of(hit))  # "- " and the newline


def current_facts(db: Database, user: str, as_of: datetime | None = None) -> list[Hit]:
    """The facts valid now (or at ``as_of``), dated by their first source episode, oldest first; none without provenance."""
    facts = fact_sql.list_all(db, user, as_of=as_of)
    sources = episode_sql.by_ids(db, user, sorted({e for f in facts for e in f.source_episode_ids}))
    hits = []
    for f in facts:
        times = [sources[e].start for e in f.source_episode_ids if e in sources]
        if times:
            hits.append(Hit(kind="fact", id=f.id, score=0.0, title="", text=f.text, start=min(times), end=max(times)))
    return sorted(hits, key=lambda h: (to_epoch(h.start), h.id))  # offsets differ between inputs: compare instants


def build(
    db: Database, user: str, budget: int, *, count: Callable[[str], int] = estimate_tokens, as_of: datetime | None = None, facts: bool = True
) -> Core:
    """The core for ``budget`` tokens, as counted by ``count`` (the answer model's tokenizer when it is at hand); ``facts=False``: raw turns only."""
    budget = int(budget / COUNT_SLACK)
    with db.snapshot():  # facts and turns of one committed state
        facts = current_facts(db, user, as_of) if facts else []
        fetch = max(1, budget // MIN_LINE_TOKENS)
        recent = message_sql.recent(db, user, fetch, as_of=as_of)
    fact_budget = int(budget * FACT_SHARE)
    kept_facts: list[Hit] = []
    used = 0
    for hit in reversed(facts):  # the newest facts first, if not all fit
        cost = count(core_prompt.fact_lines([hit])[0]) + 1
        if used + cost > fact_budget:
            break
        kept_facts.append(hit)
        used += cost
    kept_facts.reverse()
    turns: list[Hit] = []
    days: set = set()
    for m in reversed(recent):  # the newest turns first, until the budget ends
        hit = turn_hit(m)
        cost = _line_cost(hit, count) + (0 if m.timestamp.date() in days else 6)  # a new day costs its heading
        if used + cost > budget:
            break
        turns.append(hit)
        days.add(m.timestamp.date())
        used += cost
    turns.reverse()
    complete = len(turns) == len(recent) and len(recent) < fetch
    text = core_prompt.render_core(kept_facts, turns, complete=complete)
    return Core(text, tuple(kept_facts), tuple(turns), complete, len(kept_facts) == len(facts), used)


def outside(core: Core, hits: list[Hit]) -> list[Hit]:
    """What retrieval found that the core does not already show: facts left out of it, turns older than it."""
    shown = core.message_ids
    out = []
    for h in hits:
        if h.kind == "fact" and h.id in core.fact_ids:
            continue
        if h.kind == "message":
            rest = tuple(m for m in h.messages if m.id not in shown)
            if not rest or h.id in shown:
                continue
            h = replace(h, messages=rest)
        out.append(h)
    return out
