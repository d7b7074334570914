"""One ranking over every kind of memory, cut by a token budget instead of fixed counts.

Each kind's hits carry reciprocal-rank-fusion scores of the same scale (the
sum of 1/(60 + rank) over a vector and a full-text list), so episodes, facts
and raw turns can be ranked together. Walking that ranking, a hit is kept if
the lines it adds still fit; a turn already shown by another hit costs
nothing again. Fixed k/m/r bring ten episodes whatever the question; a budget
brings the best evidence of any kind and stops.
"""

from __future__ import annotations

from nemori_cli.domain import Hit
from nemori_cli.prompts.timeline import estimate_tokens, lines_of

# On equal scores the cheaper kinds first: a fact or a turn holds more
# evidence per token than a narrative.
_KIND_ORDER = {"fact": 0, "message": 1, "note": 2, "episode": 3}


def select(hits: list[Hit], budget: int, per_session: int = 0) -> list[Hit]:
    """The best hits whose lines fit ``budget`` estimated tokens, best first.

    ``per_session``: at most this many raw-turn windows from one chat session (0: no cap), so that a
    question whose answer is spread over sessions is not given five windows of the one that matched best.
    """
    ranked = sorted(hits, key=lambda h: (-h.score, _KIND_ORDER.get(h.kind, 9)))
    shown: set[str] = set()
    kept: list[Hit] = []
    used = 0
    windows: dict[str | None, int] = {}  # session -> windows kept from it
    for hit in ranked:
        session = hit.messages[0].session if hit.kind == "message" and hit.messages else None
        if per_session and session is not None and windows.get(session, 0) >= per_session:
            continue
        new = [line for line in lines_of(hit) if line.key not in shown]
        if not new:
            continue
        cost = sum(estimate_tokens(line.text) + 1 for line in new)
        if used + cost > budget:
            continue  # a smaller hit further down may still fit
        used += cost
        shown.update(line.key for line in new)
        kept.append(hit)
        if session is not None:
            windows[session] = windows.get(session, 0) + 1
    return kept
