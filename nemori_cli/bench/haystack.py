"""Long histories made from real conversations: one sample's sessions inside all the sessions of others.

A person's export is many times a small model's window and full of other
people talking about other things. LoCoMo's conversations are short (300-700
turns), so a long history is made by interleaving, by date, the target
sample's chosen sessions with every session of the named other samples, and
asking the target's questions only.

Sessions stay whole (a session is placed by its first turn's time, never cut
into another's), and the distractors' turn ids are prefixed with their sample
(``conv-30:D1:3``), so the target's evidence ids (``D1:3``) still name its own
turns and evidence recall keeps counting only them. Four whole conversations
interleaved are the same messages whichever of them is the target, so the
unit key is the set of samples: one build serves every target's questions.
"""

from __future__ import annotations

from dataclasses import replace

from nemori_cli.domain import IncomingMessage


def unit_key(target: str, others: list[str], sessions: tuple[int, int] | None) -> str:
    """The same key for the same messages: the sorted samples, and the target's session range when it has one."""
    if sessions is None:
        return "haystack:" + "+".join(sorted({target, *others}))
    lo, hi = sessions
    return f"haystack:{target}[{lo}-{hi}]+" + "+".join(sorted(set(others) - {target}))


def _sessions(messages: list[IncomingMessage]) -> list[list[IncomingMessage]]:
    """Consecutive messages of one session, in the order read."""
    out: list[list[IncomingMessage]] = []
    for m in messages:
        if out and out[-1][-1].session == m.session:
            out[-1].append(m)
        else:
            out.append([m])
    return out


def distractor(sample: str, messages: list[IncomingMessage]) -> list[IncomingMessage]:
    """Another sample's messages with ids and sessions of their own (``conv-30:D1:3``, session ``conv-30:1``)."""
    return [
        replace(
            m,
            source_id=f"{sample}:{m.source_id}" if m.source_id else None,
            session=f"{sample}:{m.session}" if m.session else sample,
        )
        for m in messages
    ]


def interleave(target: list[IncomingMessage], others: dict[str, list[IncomingMessage]]) -> list[IncomingMessage]:
    """The target's messages and every other sample's (already made distractors), whole sessions ordered by their start.

    Ties (two sessions starting the same minute) keep the target first, then
    the others in the order given, so the result never depends on a sort's luck.
    """
    blocks = [(s[0].timestamp, 0, n, s) for n, s in enumerate(_sessions(target))]
    for rank, messages in enumerate(others.values(), start=1):
        blocks += [(s[0].timestamp, rank, n, s) for n, s in enumerate(_sessions(messages))]
    blocks.sort(key=lambda b: (b[0], b[1], b[2]))
    return [m for *_, session in blocks for m in session]
