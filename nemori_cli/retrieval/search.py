"""Hybrid search over episodes: vector (cosine) and full text (BM25), fused by RRF.

Reciprocal rank fusion needs no score calibration between the two lists:
each hit scores sum(1 / (RRF_K + rank)) over the lists that found it.
Everything is filtered by user inside the indexes themselves (the vec0
partition key, the FTS user column), so one user's memories never surface
for another.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from nemori_cli.domain import Hit
from nemori_cli.embed.base import Embedder
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store.db import Database

RRF_K = 60


@dataclass(frozen=True)
class SearchOptions:
    k: int = 10  # episodes returned
    candidates: int = 50  # taken from each index before fusion
    raw_for_top: int = 2  # attach raw messages to this many top hits (the paper's r)
    mode: str = "hybrid"  # hybrid | vector | text


def fuse(ranked_lists: list[list[int]], k: int) -> list[tuple[int, float, list[int | None]]]:
    """(id, fused score, rank in each list or None), best first."""
    scores: dict[int, float] = {}
    ranks: dict[int, list[int | None]] = {}
    for li, ids in enumerate(ranked_lists):
        for rank, item in enumerate(ids, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (RRF_K + rank)
            ranks.setdefault(item, [None] * len(ranked_lists))[li] = rank
    ordered = sorted(scores, key=lambda i: (-scores[i], i))[:k]
    return [(i, scores[i], ranks[i]) for i in ordered]


def search(db: Database, user: str, embedder: Embedder, query: str, options: SearchOptions = SearchOptions()) -> tuple[list[Hit], float]:
    """Hits best first, and the milliseconds taken (query embedding included)."""
    started = time.perf_counter()
    vector_hits: list[tuple[int, float]] = []
    text_hits: list[tuple[int, float]] = []
    if options.mode in ("hybrid", "text"):
        text_hits = episode_sql.text_search(db, user, query, options.candidates)
    if options.mode in ("hybrid", "vector"):
        vector_hits = episode_sql.vector_search(db, user, embedder.embed_query(query), options.candidates)
    similarity = dict(vector_hits)
    fused = fuse([[i for i, _ in vector_hits], [i for i, _ in text_hits]], options.k)
    top_ids = [i for i, _, _ in fused]
    episodes = episode_sql.by_ids(db, user, top_ids, with_messages=False)
    with_raw = episode_sql.by_ids(db, user, top_ids[: options.raw_for_top], with_messages=True)
    hits = []
    for episode_id, score, (vrank, trank) in fused:
        ep = with_raw.get(episode_id) or episodes.get(episode_id)
        if ep is None:
            continue
        hits.append(
            Hit(
                kind="episode",
                id=ep.id,
                score=score,
                title=ep.title,
                text=ep.narrative,
                start=ep.start,
                end=ep.end,
                vector_rank=vrank,
                text_rank=trank,
                similarity=similarity.get(episode_id),
                messages=ep.messages,
            )
        )
    return hits, (time.perf_counter() - started) * 1000
