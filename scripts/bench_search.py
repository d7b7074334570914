"""Benchmark: `nemori search` latency over synthetic episodes.

Builds a fresh database per size with N synthetic episodes for one user (and
as many for a second user, so the partition filter is exercised), then times
the real search path: the query embedded by the real MiniLM model, vector
search in sqlite-vec, full-text search in FTS5, fusion and row fetches.
Baseline in the same run: numpy brute-force cosine top-k over the same
vectors held in memory (no database, no text search).

    .venv/bin/python scripts/bench_search.py --sizes 1000,10000 --queries 200 --out docs/SEARCH_LATENCY.md
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from nemori_cli.config import Settings
from nemori_cli.deps import build_embedder
from nemori_cli.domain import IncomingMessage
from nemori_cli.embed.base import identity
from nemori_cli.retrieval.search import SearchOptions, search
from nemori_cli.store import messages as message_sql
from nemori_cli.store.episodes import EpisodeDraft, add
from nemori_cli.store.sqlite import SqliteStore


def _vocabulary(size: int = 5000) -> tuple[list[str], list[float]]:
    """Pseudo-words with Zipf frequencies, like the words of real chat text."""
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = list(dict.fromkeys("".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(size * 2)))[:size]
    return words, [1.0 / (rank + 1) ** 1.1 for rank in range(len(words))]


WORDS, WEIGHTS = _vocabulary()
QUESTION_WORDS = ["when", "did", "what", "the", "where", "who", "how"]


def words(rng: random.Random, k: int) -> str:
    return " ".join(rng.choices(WORDS, weights=WEIGHTS, k=k))


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def build(db: SqliteStore, user: str, n: int, dims: int, rng: random.Random) -> np.ndarray:
    vectors = np.random.default_rng(rng.randint(0, 1 << 30)).standard_normal((n, dims)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    start = datetime(2023, 1, 1)
    with db.transaction():
        msgs = [IncomingMessage("Ann", words(rng, 12), start + timedelta(minutes=i), source_id=f"{user}-{i}") for i in range(n)]
        message_sql.insert_messages(db, user, msgs)
        for i, m in enumerate(message_sql.pending(db, user)):
            title = words(rng, 4)
            narrative = words(rng, 60)
            add(db, user, EpisodeDraft(title, narrative, m.timestamp, m.timestamp, "model", (m.id,)), vectors[i])
    return vectors


def time_size(n: int, queries: int, embedder, dims: int) -> dict:
    rng = random.Random(n)
    with tempfile.TemporaryDirectory() as tmp:
        db = SqliteStore(Path(tmp) / "bench.db")
        db.bind_embedder(identity(embedder), dims)
        t0 = time.perf_counter()
        vectors = build(db, "bench", n, dims, rng)
        build(db, "other", n, dims, rng)
        build_s = time.perf_counter() - t0
        db.checkpoint()  # as ingest does at its end
        texts = [f"{rng.choice(QUESTION_WORDS)} {rng.choice(QUESTION_WORDS)} {words(rng, rng.randint(2, 6))}" for _ in range(queries)]
        search(db, "bench", embedder, texts[0])  # warm caches
        # Each kind of timing in its own loop: OpenBLAS threads spin after a
        # numpy product and would slow the torch embedding that follows.
        totals, embeds, brute = [], [], []
        for text in texts:
            _, ms = search(db, "bench", embedder, text, SearchOptions(k=10))
            totals.append(ms)
        for text in texts:
            t = time.perf_counter()
            embedder.embed_query(text)
            embeds.append((time.perf_counter() - t) * 1000)
        query_vectors = [embedder.embed_query(text) for text in texts]
        for q in query_vectors:
            t = time.perf_counter()
            top = np.argpartition(-(vectors @ q), 10)[:10]
            brute.append((time.perf_counter() - t) * 1000)
        size = (Path(tmp) / "bench.db").stat().st_size
        db.close()
    del top
    return {
        "n": n,
        "build_s": build_s,
        "db_mb": size / 1e6,
        "search_p50": statistics.median(totals),
        "search_p95": percentile(totals, 95),
        "embed_p50": statistics.median(embeds),
        "brute_p50": statistics.median(brute),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    embedder = build_embedder(Settings.from_env(db=":memory:", user="bench"))
    rows = [time_size(int(s), args.queries, embedder, embedder.dimensions) for s in args.sizes.split(",")]
    lines = [
        "| episodes (per user; 2 users) | search p50 ms | search p95 ms | of which query embedding p50 ms | "
        "numpy brute-force top-10 p50 ms (baseline, vectors only) | search p50 / (embedding + baseline) | build s | db MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = r["search_p50"] / (r["embed_p50"] + r["brute_p50"])
        lines.append(
            f"| {r['n']:,} | {r['search_p50']:.1f} | {r['search_p95']:.1f} | {r['embed_p50']:.1f} | "
            f"{r['brute_p50']:.2f} | {ratio:.2f}x | {r['build_s']:.1f} | {r['db_mb']:.1f} |"
        )
    table = "\n".join(lines)
    print(table)
    if args.out:
        header = (
            "# Search latency\n\n"
            "`nemori search` end to end inside the process: the query embedded by all-MiniLM-L6-v2 on the CPU, "
            "sqlite-vec cosine KNN in the user's partition, FTS5 BM25, reciprocal rank fusion, row fetches "
            "(raw messages for the top 2). Synthetic episodes: random unit vectors, and text drawn from a "
            f"{len(WORDS)}-word vocabulary with Zipf frequencies (60-word narratives, 4-word titles); "
            f"{args.queries} queries per size, each two question words and 2-6 drawn words.\n\n"
            f"Machine: {platform.machine()}, {platform.processor() or 'cpu'}, 2 cores; Python {platform.python_version()}. "
            f"Run on {datetime.now():%Y-%m-%d}.\n\n"
            "Command:\n\n    .venv/bin/python scripts/bench_search.py "
            f"--sizes {args.sizes} --queries {args.queries} --out {args.out}\n\n"
        )
        args.out.write_text(header + table + "\n")


if __name__ == "__main__":
    main()
