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
from nemori_cli.store.contract import Store

FACT_SHARE = 0.25  # at most this share of the core's budget goes to facts; the rest to raw turns
MIN_LINE_TOKENS = 6  # the least a timeline line costs: how many turns to read for a budget
COUNT_SLACK = 1.02  # lines are counted one by one; their sum can differ a little from the joined text's
DAY_HEADING_TOKENS = 6  # what a day's date heading costs on the timeline
# A core that no longer holds the whole history starts at a turn whose place in the history is a
# multiple of a step, not at the oldest turn that would fit: new turns then extend the same core
# (its saved KV state is extended, not read again) until the step is crossed. The step is this share
# of the budget, at TURN_TOKENS a turn (a guess: it must depend on the budget alone to be stable).
SLIDE_SHARE = 0.25
TURN_TOKENS = 40


@dataclass(frozen=True)
class Core:
    text: str  # the user-message part that every question shares; ends with a newline
    facts: tuple[Hit, ...]
    turns: tuple[Hit, ...]  # one message hit per raw turn, oldest first
    complete: bool  # every message of the user (by ``as_of``) is in it
    all_facts: bool  # every current fact about what its turns do not show is in it
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


def current_facts(db: Store, user: str, as_of: datetime | None = None) -> list[Hit]:
    """The facts valid now (or at ``as_of``), oldest first, each spanning its source episodes (start of the first, end of the last); none without provenance."""
    facts = fact_sql.list_all(db, user, as_of=as_of)
    sources = episode_sql.by_ids(db, user, sorted({e for f in facts for e in f.source_episode_ids}))
    hits = []
    for f in facts:
        episodes = [sources[e] for e in f.source_episode_ids if e in sources]
        if episodes:
            start = min((e.start for e in episodes), key=to_epoch)
            end = max((e.end for e in episodes), key=to_epoch)
            hits.append(Hit(kind="fact", id=f.id, score=0.0, title="", text=f.text, start=start, end=end))
    return sorted(hits, key=lambda h: (to_epoch(h.start), h.id))  # offsets differ between inputs: compare instants


def _fill_turns(recent: list[Message], budget: int, count: Callable[[str], int]) -> tuple[list[Hit], int]:
    """The newest turns that fit ``budget``, oldest first, and what they cost."""
    turns: list[Hit] = []
    days: set = set()
    used = 0
    for m in reversed(recent):
        hit = turn_hit(m)
        cost = _line_cost(hit, count) + (0 if m.timestamp.date() in days else DAY_HEADING_TOKENS)
        if used + cost > budget:
            break
        turns.append(hit)
        days.add(m.timestamp.date())
        used += cost
    turns.reverse()
    return turns, used


def build(
    db: Store,
    user: str,
    budget: int,
    *,
    count: Callable[[str], int] = estimate_tokens,
    as_of: datetime | None = None,
    facts: bool = True,
) -> Core:
    """The core for ``budget`` tokens, as counted by ``count`` (the answer model's tokenizer when it is at hand).

    Raw turns come first: when the whole history fits, it is the core, and no
    fact is added (a fact distilled from turns on the page adds nothing to
    them, and a small model's facts carry its errors). Otherwise up to
    FACT_SHARE of the budget goes to the facts of what the turns no longer
    show (those whose source episodes all ended before the oldest turn kept),
    the newest first. ``facts=False``: raw turns only.
    """
    budget = int(budget / COUNT_SLACK)
    with db.snapshot():  # facts, turns and their places of one committed state
        known = current_facts(db, user, as_of) if facts else []
        fetch = max(1, budget // MIN_LINE_TOKENS)
        recent = message_sql.recent(db, user, fetch, as_of=as_of)
        turns, used = _fill_turns(recent, budget, count)
        complete = len(turns) == len(recent) and len(recent) < fetch
        kept_facts: list[Hit] = []
        reserve = 0
        costs: dict[int, int] = {}
        if not complete and known:
            costs = {h.id: count(core_prompt.fact_lines([h])[0]) + 1 for h in known}
            reserve = min(int(budget * FACT_SHARE), sum(costs.values()))
            turns, used = _fill_turns(recent, budget - reserve, count)
        if not complete and turns:
            turns, used = _aligned(db, user, turns, used, step(budget), count)
        if not complete and known:
            oldest = to_epoch(turns[0].start) if turns else float("inf")
            spent = 0
            for hit in reversed(known):  # the newest facts of what the turns no longer show
                if to_epoch(hit.end) >= oldest:
                    continue
                if spent + costs[hit.id] > reserve:
                    break
                kept_facts.append(hit)
                spent += costs[hit.id]
            kept_facts.reverse()
            used += spent
    shown = {h.id for h in kept_facts}
    older = [h for h in known if to_epoch(h.end) < (to_epoch(turns[0].start) if turns else float("inf"))]
    text = core_prompt.render_core(kept_facts, turns, complete=complete)
    return Core(text, tuple(kept_facts), tuple(turns), complete, all(h.id in shown for h in older), used)


def step(budget: int) -> int:
    """Turns between the places a core may start at, for ``budget`` tokens."""
    return max(1, round(budget * SLIDE_SHARE / TURN_TOKENS))


def _aligned(db: Store, user: str, turns: list[Hit], used: int, every: int, count: Callable[[str], int]) -> tuple[list[Hit], int]:
    """``turns`` from the first whose place in the history is a multiple of ``every``, and what they cost."""
    first = message_sql.place(db, user, turns[0].messages[0])
    drop = -first % every
    if drop == 0 or drop >= len(turns):
        return turns, used
    kept = turns[drop:]
    return kept, sum(_line_cost(h, count) for h in kept) + DAY_HEADING_TOKENS * len({h.start.date() for h in kept})


def outside(core: Core, hits: list[Hit]) -> list[Hit]:
    """What retrieval found that the core does not already show: facts of older turns left out of it, turns older than it."""
    shown = core.message_ids
    oldest = to_epoch(core.turns[0].start) if core.turns else float("inf")
    out = []
    for h in hits:
        if h.kind == "fact" and (h.id in core.fact_ids or to_epoch(h.end) >= oldest):
            continue  # in the core, or distilled from turns it shows
        if h.kind == "message":
            rest = tuple(m for m in h.messages if m.id not in shown)
            if not rest or h.id in shown:
                continue
            h = replace(h, messages=rest)
        out.append(h)
    return out
