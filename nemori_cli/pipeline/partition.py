"""Stage 2: cut a window of messages into episode groups, never trusting the model.

Order of evidence:
1. A long silence (``gap_minutes``) always starts a new episode: free and certain.
2. Inside each stretch without such a gap, the model proposes boundaries. Its
   answer is repaired: positions sorted and deduplicated; a run of consecutive
   positions ([11, 12, 13, 14]) collapses to its first (small models, once
   started, tend to list every following number); groups shorter than
   ``min_group`` merge into their neighbour.
3. When the model gives no valid answer, a deterministic split replaces it:
   stretches longer than ``max_group`` are cut where adjacent messages are
   least similar (embedding cosine). Counted as a fallback.

With ``method="similarity"`` step 2 makes no call: each stretch is cut where
the messages on either side of a point are least alike (``topic_cuts``), into
groups of about ``target_group`` messages. A 0.5B model's boundaries were
noise (docs/PERFORMANCE.md section 9: "[13, 2, 4, 5, 6, 7]", repaired to
whatever the repair allowed), and its call cost a quarter of an ingest.

The result is always a partition: every message in exactly one group, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nemori_cli import stages
from nemori_cli.domain import Message, to_epoch
from nemori_cli.embed.base import Embedder, max_chars
from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.prompts import partition as prompt
from nemori_cli.store import message_index

STAGE = stages.PARTITION


@dataclass(frozen=True)
class Group:
    messages: tuple[Message, ...]
    boundary: str  # what started it: "start", "time-gap", "model", "fallback"


@dataclass(frozen=True)
class PartitionSettings:
    gap_minutes: float = 120.0
    min_group: int = 3
    max_group: int = 12
    min_model_stretch: int = 6  # shorter stretches are one episode; no call needed
    method: str = "model"  # "model": the LLM proposes boundaries; "similarity": embeddings alone (no call)
    target_group: int = 6  # with "similarity": messages per episode aimed at (the model's own average on LoCoMo)


def split_on_gaps(messages: list[Message], gap_minutes: float) -> list[list[Message]]:
    stretches: list[list[Message]] = [[messages[0]]] if messages else []
    for prev, cur in zip(messages, messages[1:]):
        if to_epoch(cur.timestamp) - to_epoch(prev.timestamp) >= gap_minutes * 60:
            stretches.append([cur])
        else:
            stretches[-1].append(cur)
    return stretches


def repair_boundaries(raw: list[int], n: int, min_group: int) -> list[int]:
    """Valid, ascending 0-based start positions (excluding 0) from a model's 1-based answer."""
    positions = sorted({p - 1 for p in raw if 2 <= p <= n})
    collapsed = [p for i, p in enumerate(positions) if i == 0 or p != positions[i - 1] + 1]
    kept: list[int] = []
    for p in collapsed:
        previous = kept[-1] if kept else 0
        if p - previous >= min_group and n - p >= min_group:
            kept.append(p)
    return kept


def similarity_cuts(vectors: np.ndarray, max_group: int, min_group: int) -> list[int]:
    """Cut positions so no group exceeds max_group, at the least similar neighbours."""
    n = len(vectors)
    if n <= max_group:
        return []
    adjacent = np.einsum("ij,ij->i", vectors[:-1], vectors[1:])  # cos(m[i], m[i+1]); vectors are unit length
    cuts: list[int] = []
    start = 0
    while n - start > max_group:
        lo, hi = start + min_group, min(start + max_group, n - min_group)
        if hi < lo:
            break
        candidates = range(lo, hi + 1)
        cut = min(candidates, key=lambda p: adjacent[p - 1])  # cut before message p
        cuts.append(cut)
        start = cut
    return cuts


def topic_cuts(vectors: np.ndarray, *, min_group: int, max_group: int, target: int, width: int = 3) -> list[int]:
    """Cut positions where the topic turns most, about one cut per ``target`` messages; no group past max_group.

    A point's score is the cosine between the mean of the ``width`` messages
    before it and the mean of the ``width`` after it (TextTiling's block
    comparison, on sentence embeddings): one short reply ("Nice!") barely
    moves a block's mean, where it would break a comparison of neighbours.
    The least alike points win, each at least ``min_group`` from the stretch's
    ends and from each other.
    """
    n = len(vectors)
    if n < 2 * min_group:
        return []
    wanted = max(-(-n // max_group) - 1, round(n / target) - 1)
    scores: dict[int, float] = {}
    for p in range(min_group, n - min_group + 1):
        before = vectors[max(0, p - width) : p].mean(axis=0)
        after = vectors[p : p + width].mean(axis=0)
        scores[p] = float(before @ after / ((np.linalg.norm(before) * np.linalg.norm(after)) or 1.0))
    cuts: list[int] = []
    for p in sorted(scores, key=lambda q: (scores[q], q)):
        if len(cuts) >= wanted:
            break
        if all(abs(p - c) >= min_group for c in cuts):
            cuts.append(p)
    cuts.sort()
    # Spacing can leave a group too long (few admissible points): cut it again at its weakest neighbours.
    final: list[int] = []
    for a, b in zip([0, *cuts], [*cuts, n]):
        final += [a + c for c in similarity_cuts(vectors[a:b], max_group, min_group)]
        if b < n:
            final.append(b)
    return sorted(final)


def _groups(stretch: list[Message], cuts: list[int], how: str, first: str) -> list[Group]:
    edges = [0, *cuts, len(stretch)]
    return [Group(tuple(stretch[a:b]), first if i == 0 else how) for i, (a, b) in enumerate(zip(edges, edges[1:]))]


def _vectors(embedder: Embedder, messages: Sequence[Message]) -> np.ndarray:
    """The messages embedded as the message index embeds them: the beginning of each, all the embedder reads (embed/base.py)."""
    return embedder.embed_documents([message_index.embedding_text(m, max_chars(embedder)) for m in messages])


def partition(
    messages: list[Message],
    llm: StructuredLLM,
    embedder: Embedder,
    settings: PartitionSettings = PartitionSettings(),
) -> list[Group]:
    groups: list[Group] = []
    for s, stretch in enumerate(split_on_gaps(messages, settings.gap_minutes)):
        first = "start" if s == 0 else "time-gap"
        if len(stretch) < settings.min_model_stretch:
            groups.append(Group(tuple(stretch), first))
            continue
        if settings.method == "similarity":
            vectors = _vectors(embedder, stretch)
            cuts = topic_cuts(vectors, min_group=settings.min_group, max_group=settings.max_group, target=settings.target_group)
            groups.extend(_groups(stretch, cuts, "similarity", first))
            continue
        groups.extend(_partition_stretch(stretch, llm, embedder, settings, first))
    assert [m.id for g in groups for m in g.messages] == [m.id for m in messages], "not a partition"
    return groups


def _partition_stretch(
    stretch: list[Message], llm: StructuredLLM, embedder: Embedder, settings: PartitionSettings, first: str
) -> list[Group]:
    n = len(stretch)
    schema = prompt.schema_for(n, max(1, n // settings.min_group))
    try:
        answer = llm.complete(prompt.render(stretch), schema=schema, stage=STAGE).value
    except LLMOutputError as e:
        llm.log.fallback(STAGE, f"no usable boundaries ({e.message}); split by similarity")
        vectors = _vectors(embedder, stretch)
        return _groups(stretch, similarity_cuts(vectors, settings.max_group, settings.min_group), "fallback", first)
    raw = list(answer.boundaries)
    cuts = repair_boundaries(raw, n, settings.min_group)
    if sorted(set(raw)) != [c + 1 for c in cuts]:
        llm.log.repaired(STAGE, f"boundaries {raw} -> {[c + 1 for c in cuts]}")
    groups = _groups(stretch, cuts, "model", first)
    # A model that saw no boundary in a long stretch still must not make a
    # 40-message episode: cut the oversized groups by similarity.
    final: list[Group] = []
    for g in groups:
        if len(g.messages) > settings.max_group:
            vectors = _vectors(embedder, g.messages)
            extra = similarity_cuts(vectors, settings.max_group, settings.min_group)
            final.extend(_groups(list(g.messages), extra, "size", g.boundary))
        else:
            final.append(g)
    return final
