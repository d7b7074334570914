"""Benchmark: vector search on large stores (10k to 1M memories), SQLite and PostgreSQL, real MiniLM vectors.

Memories are real chat text: the sentences of the LoCoMo and LongMemEval
development files in ../shared/data (messages split at sentence ends, four
words or more, each once: 5,766 of them). Past those, each further memory is
two of those real sentences joined (a seeded draw of pairs, each pair once):
real words and real topics, but not text anyone wrote as one piece. Queries
are the real questions of the same files (LoCoMo QA and LongMemEval), 200 of
them. Everything is embedded by the project's all-MiniLM-L6-v2 on the CPU.

Stages, each resumable (vectors cached as .npy, built stores kept and reused):

    nice -n 19 .venv/bin/python scripts/bench_search_large.py embed --count 110000
    nice -n 19 .venv/bin/python scripts/bench_search_large.py run --sizes 10000,100000 --engines sqlite,postgresql

A store of size N holds N episodes of the user searched ("bench") and N/10 of
a second user ("other"), so the partition filter (SQLite) and the post-filter
of an HNSW scan (PostgreSQL) are exercised. Recall@10 is against numpy's exact
cosine top 10 over the same float32 vectors of the searched user.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"
CACHE = REPO / "bench-results" / "search-large"
CHUNK = 10_000
_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


# -- the corpus ---------------------------------------------------------------
def _message_texts() -> list[str]:
    texts = []
    for sample in json.loads((DATA / "locomo" / "locomo-dev.json").read_text()):
        for key, value in sample["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                texts += [turn["text"] for turn in value]
    for item in json.loads((DATA / "longmemeval" / "longmemeval-oracle-dev.json").read_text()):
        for session in item["haystack_sessions"]:
            texts += [turn["content"] for turn in session]
    return texts


def sentences() -> list[str]:
    """The unique real sentences (four words or more), in the order the files give them."""
    out = []
    for text in _message_texts():
        for piece in _SPLIT.split(text):
            piece = piece.strip(" -*#\t")
            if len(piece.split()) >= 4:
                out.append(piece)
    return list(dict.fromkeys(out))


def corpus(count: int) -> list[str]:
    """``count`` memory texts: every real sentence once, then pairs of them joined (seeded; a prefix of a longer corpus)."""
    base = sentences()
    out = base[:count]
    rng = random.Random(20)
    seen = set()
    while len(out) < count:
        a, b = rng.randrange(len(base)), rng.randrange(len(base))
        if a == b or (a, b) in seen:
            continue
        seen.add((a, b))
        out.append(f"{base[a]} {base[b]}")
    return out


def questions(count: int = 200) -> list[str]:
    qs = [q["question"] for s in json.loads((DATA / "locomo" / "locomo-dev.json").read_text()) for q in s["qa"]]
    qs += [q["question"] for q in json.loads((DATA / "longmemeval" / "longmemeval-oracle-dev.json").read_text())]
    qs = list(dict.fromkeys(qs))
    random.Random(7).shuffle(qs)
    return qs[:count]


def embedder():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from nemori_cli.config import Settings
    from nemori_cli.deps import build_embedder

    return build_embedder(Settings.from_env(db=":memory:", user="bench"))


# -- stage 1: vectors -----------------------------------------------------------
class _Bf16:
    """The embedder's documents computed under bfloat16 autocast: about 1.5x faster on a CPU with AVX-512 BF16.

    Measured on 1,500 joined pairs against float32: cosine >= 0.99996 for
    every text (mean 0.99999), 218 against 143 texts/s. 1.1M texts in float32
    would take over two hours on 2 cores. Queries stay float32 (the product's own path).
    """

    def __init__(self, inner):
        self.inner = inner

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        import torch

        with torch.autocast("cpu", dtype=torch.bfloat16):
            return np.asarray(self.inner.embed_documents(texts), dtype=np.float32)


def embed(count: int, bf16: bool = True, shard: tuple[int, int] = (0, 1)) -> None:
    """Embed the first ``count`` memory texts in chunks of CHUNK, each chunk cached (a rerun goes on where it stopped).

    ``shard`` (i, n): this process takes every n-th chunk from the i-th, on
    one thread. Two such processes on 2 cores embed about as fast as one on
    two threads, and unlike it they do not collapse when anything else runs
    (a 2-thread torch process whose threads wait on each other fell from 226
    to 22 texts/s beside a PostgreSQL load).
    """
    CACHE.mkdir(parents=True, exist_ok=True)
    texts = corpus(count)
    if shard[1] > 1:
        import torch

        torch.set_num_threads(1)
    model = _Bf16(embedder()) if bf16 else embedder()
    qpath = CACHE / "queries.npy"
    if not qpath.exists():
        np.save(qpath, np.stack([model.embed_query(q) for q in questions()]))
    log = CACHE / "embed-log.jsonl"
    for start in range(0, count, CHUNK):
        path = CACHE / f"vec-{start // CHUNK:04d}.npy"
        if path.exists() or (start // CHUNK) % shard[1] != shard[0]:
            continue
        chunk = texts[start : start + CHUNK]
        t = time.perf_counter()
        vectors = model.embed_documents(chunk)
        seconds = time.perf_counter() - t
        tmp = path.with_name(f"{path.stem}.tmp{shard[0]}.npy")
        np.save(tmp, vectors)
        tmp.rename(path)
        record = {
            "chunk": start // CHUNK,
            "texts": len(chunk),
            "bf16": bf16,
            "seconds": round(seconds, 1),
            "per_s": round(len(chunk) / seconds, 1),
            "at": datetime.now().isoformat(timespec="seconds"),
        }
        with log.open("a") as f:
            f.write(json.dumps(record) + "\n")
        print(record, flush=True)


def load_vectors(count: int) -> np.ndarray:
    chunks = []
    for start in range(0, count, CHUNK):
        path = CACHE / f"vec-{start // CHUNK:04d}.npy"
        if not path.exists():
            raise SystemExit(f"{path} missing: run the embed stage with --count {count} first")
        chunks.append(np.load(path))
    return np.concatenate(chunks)[:count]


# -- stage 2: stores -------------------------------------------------------------
def user_vectors(n: int, pool: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int], list[int]]:
    """The searched user's n vectors (the pool's first n) and the other user's n/10 (the pool's end: the next n/10, never the same texts)."""
    other = max(1, n // 10)
    return pool[:n], pool[len(pool) - other :], list(range(n)), list(range(len(pool) - other, len(pool)))


def pg_server():
    import pgserver

    folder = CACHE / "pgdata"
    folder.parent.mkdir(parents=True, exist_ok=True)
    return pgserver.get_server(folder, cleanup_mode="stop")  # kept between runs: built stores are reused


def pg_url(server, name: str) -> str:
    import psycopg

    base = server.get_uri()
    head, _, tail = base.partition("@/")
    _, _, query = tail.partition("?")
    with psycopg.connect(base, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f"CREATE DATABASE {name}")
    return f"{head}@/{name}?{query}" if query else f"{head}@/{name}"


def drop_pg(server, name: str) -> None:
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def load(db, user: str, texts: list[str], vectors: np.ndarray, start: datetime) -> None:
    """One message and one episode per memory (title: its first words; narrative: the text), through the store's own inserts."""
    from nemori_cli.domain import IncomingMessage
    from nemori_cli.store import messages as message_sql
    from nemori_cli.store.episodes import EpisodeDraft, add

    step = 5_000
    for lo in range(0, len(texts), step):
        with db.transaction(user=user):
            msgs = [
                IncomingMessage("Ann", texts[i], start + timedelta(minutes=i), source_id=f"{user}-{i}")
                for i in range(lo, min(lo + step, len(texts)))
            ]
            message_sql.insert_messages(db, user, msgs)
            for j, m in enumerate(message_sql.pending(db, user)):
                i = lo + j
                title = " ".join(texts[i].split()[:6])
                add(db, user, EpisodeDraft(title, texts[i], m.timestamp, m.timestamp, "model", (m.id,)), vectors[i])


def bulk_load_pg(db, users: list[tuple[str, list[str], np.ndarray, datetime]]) -> None:
    """The same rows ``load`` writes (messages, episodes, their full-text and vector rows), by COPY.

    Through the store's own inserts a PostgreSQL store loads about 400
    memories a second here (a round trip per statement): 45 minutes for 1.1M.
    COPY writes the same rows in a few minutes; the GIN and HNSW indexes are
    built after, as CREATE INDEX on a loaded table does. ``run --check-bulk``
    compares a store loaded each way.
    """
    from pgvector.psycopg import register_vector

    from nemori_cli.domain import IncomingMessage, to_epoch
    from nemori_cli.store.clock import now_iso
    from nemori_cli.store.messages import keys_for

    raw = db.conn.raw
    register_vector(raw)
    stamp = now_iso()
    with raw.transaction():
        raw.execute("DROP INDEX IF EXISTS episode_fts_tsv")
        raw.execute("DROP INDEX IF EXISTS episode_vec_hnsw")  # built after the load (build() times it), never row by row
        episode_id = message_id = 0
        for user, texts, vectors, start in users:
            msgs = [IncomingMessage("Ann", t, start + timedelta(minutes=i), source_id=f"{user}-{i}") for i, t in enumerate(texts)]
            keys = keys_for(msgs)
            with raw.cursor() as cur:
                with cur.copy(
                    "COPY episodes (id, user_id, title, narrative, start_ts, end_ts, start_epoch, end_epoch, boundary, created_at) FROM STDIN"
                ) as copy:
                    for i, m in enumerate(msgs):
                        ts = m.timestamp.isoformat()
                        copy.write_row(
                            (
                                episode_id + i + 1,
                                user,
                                " ".join(m.content.split()[:6]),
                                m.content,
                                ts,
                                ts,
                                to_epoch(m.timestamp),
                                to_epoch(m.timestamp),
                                "model",
                                stamp,
                            )
                        )
                with cur.copy(
                    "COPY messages (id, user_id, msg_key, source_id, session, speaker, content, ts, ts_epoch, episode_id, ingested_at) FROM STDIN"
                ) as copy:
                    for i, (m, key) in enumerate(zip(msgs, keys)):
                        copy.write_row(
                            (
                                message_id + i + 1,
                                user,
                                key,
                                m.source_id,
                                m.session,
                                m.speaker,
                                m.content,
                                m.timestamp.isoformat(),
                                to_epoch(m.timestamp),
                                episode_id + i + 1,
                                stamp,
                            )
                        )
                with cur.copy("COPY episode_fts (rowid, title, narrative, user_id) FROM STDIN") as copy:
                    for i, m in enumerate(msgs):
                        copy.write_row((episode_id + i + 1, " ".join(m.content.split()[:6]), m.content, user))
                with cur.copy("COPY episode_vec (rowid, user_id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
                    copy.set_types(["int8", "text", "vector"])
                    for i in range(len(msgs)):
                        copy.write_row((episode_id + i + 1, user, np.asarray(vectors[i], dtype=np.float32)))
            episode_id += len(msgs)
            message_id += len(msgs)
        raw.execute("SELECT setval(pg_get_serial_sequence('episodes', 'id'), %s)", (episode_id,))
        raw.execute("SELECT setval(pg_get_serial_sequence('messages', 'id'), %s)", (message_id,))
        raw.execute("SET LOCAL maintenance_work_mem = '2GB'")
        raw.execute("CREATE INDEX episode_fts_tsv ON episode_fts USING gin (tsv)")


def build(
    engine: str, n: int, pool: np.ndarray, texts: list[str], identity_: str, server=None, bulk: bool = True, tag: str = ""
) -> tuple[object, dict]:
    """The store of size n (reused when a previous run finished it), and its build record."""
    from nemori_cli.store.engines import open_store

    record_path = CACHE / f"built-{engine}-{n}{tag}.json"
    target = str(CACHE / f"sqlite-{n}{tag}.db") if engine == "sqlite" else pg_url(server, f"bench_{n}{tag}")
    if record_path.exists():
        return open_store(target), json.loads(record_path.read_text())
    if engine == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(target + suffix).unlink(missing_ok=True)
    else:
        drop_pg(server, f"bench_{n}{tag}")
        target = pg_url(server, f"bench_{n}{tag}")
    bench, other, bench_ix, other_ix = user_vectors(n, pool)
    db = open_store(target)
    db.bind_embedder(identity_, pool.shape[1])
    record = {"engine": engine, "n": n, "other_n": len(other)}
    if engine == "postgresql":
        # Bulk load without the graph, then build it once (as CREATE INDEX on a loaded table does): the build timed on its own.
        for t in ("episode_vec", "fact_vec", "note_vec", "message_vec"):
            db.conn.execute(f"DROP INDEX IF EXISTS {t}_hnsw")
    t0 = time.perf_counter()
    users = [
        ("bench", [texts[i] for i in bench_ix], bench, datetime(2023, 1, 1)),
        ("other", [texts[i] for i in other_ix], other, datetime(2024, 1, 1)),
    ]
    if engine == "postgresql" and bulk:
        bulk_load_pg(db, users)
        record["load"] = "COPY"
    else:
        for user, user_texts, vectors, start in users:
            load(db, user, user_texts, vectors, start)
        record["load"] = "store inserts"
    record["load_s"] = time.perf_counter() - t0
    if engine == "postgresql":
        t0 = time.perf_counter()
        db.conn.execute("SET maintenance_work_mem = '4GB'")
        for t in ("episode_vec", "fact_vec", "note_vec", "message_vec"):
            db._create_hnsw(t)
        record["hnsw_build_s"] = time.perf_counter() - t0
        db.conn.execute("VACUUM ANALYZE")
        record["disk_mb"] = db.size_bytes() / 1e6
        record["episode_vec_mb"] = int(db.one("SELECT pg_total_relation_size('episode_vec') AS n")["n"]) / 1e6
        record["hnsw_index_mb"] = int(db.one("SELECT pg_relation_size('episode_vec_hnsw') AS n")["n"]) / 1e6
    else:
        db.checkpoint()
        record["disk_mb"] = db.size_bytes() / 1e6
        pages = {r["name"]: r["n"] for r in db.query("SELECT name, sum(pgsize) AS n FROM dbstat GROUP BY name")} if _has_dbstat(db) else {}
        if pages:
            record["episode_vec_mb"] = (
                sum(v for k, v in pages.items() if k.startswith("episode_vec") and not k.startswith("episode_vec_bits")) / 1e6
            )
            record["episode_vec_bits_mb"] = sum(v for k, v in pages.items() if k.startswith("episode_vec_bits")) / 1e6
    record["build_s"] = record["load_s"] + record.get("hnsw_build_s", 0.0)
    record["built_at"] = datetime.now().isoformat(timespec="seconds")
    record_path.write_text(json.dumps(record, indent=1))
    return db, record


def _has_dbstat(db) -> bool:
    try:
        db.one("SELECT count(*) AS n FROM dbstat LIMIT 1")
        return True
    except Exception:
        return False


# -- stage 3: timings ------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int) -> list[list[int]]:
    sims = queries @ vectors.T
    return [list(np.argsort(-row, kind="stable")[:k]) for row in sims]


def time_vector(db, user: str, queries: np.ndarray, k: int, truth: list[set[int]] | None, id_of_row: dict[int, int]) -> dict:
    """p50/p95 ms of the engine's vector_search, and recall@k against ``truth`` (pool indices)."""
    times, hits = [], 0
    db.vector_search("episode_vec", user, queries[0], k)
    for qi, q in enumerate(queries):
        t = time.perf_counter()
        got = db.vector_search("episode_vec", user, q, k)
        times.append((time.perf_counter() - t) * 1000)
        if truth is not None:
            hits += len({id_of_row[r] for r, _ in got} & truth[qi])
    out = {"p50": statistics.median(times), "p95": pct(times, 95)}
    if truth is not None:
        out["recall"] = hits / (k * len(queries))
    return out


class forced:
    """Set module constants for a block (the exact baseline, a sweep's settings), then put them back."""

    def __init__(self, **values):
        from nemori_cli.store import index, pg, sqlite_vectors

        self.values = values
        self.modules = [sqlite_vectors, pg, index]

    def __enter__(self):
        self.saved = []
        for name, value in self.values.items():
            for m in self.modules:
                if hasattr(m, name):
                    self.saved.append((m, name, getattr(m, name)))
                    setattr(m, name, value)

    def __exit__(self, *exc):
        for m, name, value in reversed(self.saved):
            setattr(m, name, value)


def measure(
    engine: str, n: int, db, pool: np.ndarray, queries: np.ndarray, texts_q: list[str], model, n_queries: int, exact_queries: int = 0
) -> dict:
    from nemori_cli.retrieval.search import SearchOptions, search

    bench, other, bench_ix, other_ix = user_vectors(n, pool)
    queries, texts_q = queries[:n_queries], texts_q[:n_queries]
    # Row ids of the store -> pool indices (episodes were inserted in pool order, bench first).
    rows = db.query("SELECT id, user_id FROM episodes ORDER BY id")
    by_user = {"bench": [r["id"] for r in rows if r["user_id"] == "bench"], "other": [r["id"] for r in rows if r["user_id"] == "other"]}
    id_of_row = {rid: bench_ix[i] for i, rid in enumerate(by_user["bench"])} | {rid: other_ix[i] for i, rid in enumerate(by_user["other"])}
    truth = {
        u: [set(ix[j] for j in top) for top in exact_top(v, queries, 10)]
        for u, v, ix in (("bench", bench, bench_ix), ("other", other, other_ix))
    }
    from nemori_cli.store import pg, sqlite_vectors

    out: dict = {"engine": engine, "n": n, "queries": len(queries)}
    # The defaults this run measured: SQLite's per user, PostgreSQL's per table (every user's rows).
    out["threshold"] = sqlite_vectors.QUANTISED_MIN_ROWS if engine == "sqlite" else pg.HNSW_MIN_ROWS
    out["default_path"] = (
        ("sign bits + rescore" if n >= out["threshold"] else "exact (below threshold)")
        if engine == "sqlite"
        else ("HNSW + post-filter" if n + max(1, n // 10) >= out["threshold"] else "exact (below threshold)")
    )
    if engine == "postgresql":
        out["hnsw_candidates"] = pg.HNSW_LARGE_CANDIDATES if n + max(1, n // 10) >= pg.HNSW_LARGE_ROWS else pg.HNSW_CANDIDATES
    never = 10**12
    exact_knobs = {"QUANTISED_MIN_ROWS": never, "HNSW_MIN_ROWS": never}
    # The exact scans at 1M take over a second a query: --exact-queries times them on the first few only.
    ne = min(exact_queries or len(queries), len(queries))
    out["exact_queries"] = ne
    with forced(**exact_knobs):
        out["exact_k10"] = time_vector(db, "bench", queries[:ne], 10, truth["bench"][:ne], id_of_row)
        out["exact_k50"] = time_vector(db, "bench", queries[:ne], 50, None, id_of_row)
    out["auto_k10"] = time_vector(db, "bench", queries, 10, truth["bench"], id_of_row)
    out["auto_k50"] = time_vector(db, "bench", queries, 50, None, id_of_row)
    out["auto_other_k10"] = time_vector(db, "other", queries, 10, truth["other"], id_of_row)
    sweep = []
    if engine == "sqlite":
        for oversample, least in ((5, 50), (10, 100), (20, 200), (40, 400), (80, 800)):
            with forced(QUANTISED_MIN_ROWS=1, QUANTISED_OVERSAMPLE=oversample, QUANTISED_MIN_CANDIDATES=least):
                sweep.append(
                    {"candidates_k10": max(10 * oversample, least)} | time_vector(db, "bench", queries, 10, truth["bench"], id_of_row)
                )
    else:
        for cands in (40, 100, 200, 400, 800):
            with forced(HNSW_MIN_ROWS=1, HNSW_CANDIDATES=cands, HNSW_LARGE_CANDIDATES=cands, HNSW_EF_SEARCH=cands):
                db._ef_search = None
                row = {"candidates": cands} | time_vector(db, "bench", queries, 10, truth["bench"], id_of_row)
                row["other"] = time_vector(db, "other", queries, 10, truth["other"], id_of_row)
                sweep.append(row)
        db._ef_search = None
    out["sweep"] = sweep
    if engine == "postgresql":
        # Which plan the HNSW query gets (the index, not a scan and sort): one EXPLAIN, recorded.
        blob = np.asarray(queries[0], dtype=np.float32).tobytes()
        from nemori_cli.store import pg

        plan = db.query(
            "EXPLAIN SELECT rowid, distance FROM (SELECT rowid, user_id, embedding <=> ? AS distance FROM episode_vec"
            " ORDER BY embedding <=> ? LIMIT ?) AS near WHERE user_id = ? ORDER BY distance, rowid LIMIT ?",
            (blob, blob, pg.HNSW_CANDIDATES, "bench", 10),
        )
        out["hnsw_plan"] = [next(iter(r.values())) for r in plan]
    # The whole search path (query embedding, vector and full-text search, fusion, row fetches), as `nemori search` runs it.
    search(db, "bench", model, texts_q[0])
    for label, knobs in (("search_exact", exact_knobs), ("search_auto", {})):
        with forced(**knobs):
            times = []
            for text in texts_q[:ne] if knobs else texts_q:
                _, ms = search(db, "bench", model, text, SearchOptions(k=10))
                times.append(ms)
        out[label] = {"p50": statistics.median(times), "p95": pct(times, 95)}
    # The same path with each query's vector computed beforehand: the store's part alone (the
    # embedding on a busy 2-core machine varies far more than anything the store does).
    cached = _Cached(model, texts_q)
    for label, knobs in (("store_exact", exact_knobs), ("store_auto", {})):
        with forced(**knobs):
            times = []
            for text in texts_q[:ne] if knobs else texts_q:
                _, ms = search(db, "bench", cached, text, SearchOptions(k=10))
                times.append(ms)
        out[label] = {"p50": statistics.median(times), "p95": pct(times, 95)}
    out["text"] = measure_text(db, texts_q, cached, ne)
    embeds = []
    for text in texts_q:
        t = time.perf_counter()
        model.embed_query(text)
        embeds.append((time.perf_counter() - t) * 1000)
    out["embed_p50"] = statistics.median(embeds)
    brute = []
    for q in queries:
        t = time.perf_counter()
        np.argpartition(-(bench @ q), 10)[:10]
        brute.append((time.perf_counter() - t) * 1000)
    out["numpy_p50"] = statistics.median(brute)
    return out


def measure_text(db, texts_q: list[str], cached, n_unbounded: int) -> dict:
    """The full-text part of the search alone, how often the budget leaves it empty, and what the budget changes.

    ``unbounded_*`` run the search as it was before TEXT_MATCH_BUDGET (every
    word in at most 20% of the rows, every match ranked) on the first
    ``n_unbounded`` questions: its time, and how many of its top 10 the
    default search also returns.
    """
    from nemori_cli.retrieval.search import SearchOptions, search
    from nemori_cli.store import index

    times, empty = [], 0
    for text in texts_q:
        t = time.perf_counter()
        chosen = index.text_query(db, text, index.EPISODE_TEXT)
        db.text_search(index.EPISODE_TEXT.fts, "bench", chosen.words, 50, None, max_rows=chosen.max_rows)
        times.append((time.perf_counter() - t) * 1000)
        empty += not chosen.words
    out = {"p50": statistics.median(times), "p95": pct(times, 95), "budget": index.TEXT_MATCH_BUDGET, "questions_without_text_list": empty}
    never = 10**12
    unbounded, overlap = [], []
    for text in texts_q[:n_unbounded]:
        top = [(h.kind, h.id) for h in search(db, "bench", cached, text, SearchOptions(k=10))[0]]
        with forced(TEXT_MATCH_BUDGET=never):
            t = time.perf_counter()
            index.text_search(db, index.EPISODE_TEXT, "bench", text, 50)
            unbounded.append((time.perf_counter() - t) * 1000)
            before = [(h.kind, h.id) for h in search(db, "bench", cached, text, SearchOptions(k=10))[0]]
        overlap.append(len(set(top) & set(before)) / max(1, len(before)))
    if unbounded:
        out |= {
            "unbounded_p50": statistics.median(unbounded),
            "unbounded_p95": pct(unbounded, 95),
            "top10_overlap_with_unbounded": statistics.mean(overlap),
            "unbounded_queries": len(unbounded),
        }
    return out


class _Cached:
    """The embedder, with every query's vector computed once beforehand."""

    def __init__(self, model, texts: list[str]):
        self.model_name, self.dimensions = model.model_name, model.dimensions
        self.vectors = {t: model.embed_query(t) for t in texts}

    def embed_query(self, text: str) -> np.ndarray:
        return self.vectors[text]


def run(sizes: list[int], engines: list[str], n_queries: int, out_json: Path | None, exact_queries: int = 0, bulk: bool = True) -> None:
    from nemori_cli.embed.base import identity

    need = max(sizes) + max(1, max(sizes) // 10)
    pool = load_vectors(need)
    texts = corpus(need)
    queries = np.load(CACHE / "queries.npy")
    texts_q = questions()
    model = embedder()
    ident = identity(model)
    server = pg_server() if "postgresql" in engines else None
    results = []
    for n in sizes:
        for engine in engines:
            # The pool for this size: the first n memories (the searched user's) and the next n/10 (the other user's).
            sub, sub_texts = pool[: n + max(1, n // 10)], texts[: n + max(1, n // 10)]
            db, record = build(engine, n, sub, sub_texts, ident, server, bulk=bulk)
            print(json.dumps(record), flush=True)
            result = {"build": record} | measure(engine, n, db, sub, queries, texts_q, model, n_queries, exact_queries)
            db.close()
            print(json.dumps(result), flush=True)
            results.append(result)
            partial = CACHE / f"result-{engine}-{n}.json"
            partial.write_text(json.dumps(result, indent=1))
    machine = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {_cpu_name()}",
        "python": platform.python_version(),
        "load_avg_at_end": os.getloadavg(),
        "date": datetime.now().isoformat(timespec="seconds"),
    }
    if out_json:
        out_json.write_text(json.dumps({"machine": machine, "results": results}, indent=1) + "\n")


def warm_search(n: int, engine: str, n_queries: int, passes: int) -> None:
    """`nemori search` alone on a built store, ``passes`` times over the questions with no exact scan between: the steady state."""
    from nemori_cli.retrieval.search import SearchOptions, search
    from nemori_cli.store.engines import open_store

    if not (CACHE / f"built-{engine}-{n}.json").exists():
        raise SystemExit(f"no {engine} store of size {n} built in {CACHE}: run the run stage with --sizes {n} --engines {engine} first")
    server = pg_server() if engine == "postgresql" else None
    db = open_store(str(CACHE / f"sqlite-{n}.db") if engine == "sqlite" else pg_url(server, f"bench_{n}"))
    model, texts_q = embedder(), questions()[:n_queries]
    for p in range(passes):
        times = [search(db, "bench", model, text, SearchOptions(k=10))[1] for text in texts_q]
        print(
            json.dumps(
                {"engine": engine, "n": n, "pass": p + 1, "queries": len(texts_q), "p50": statistics.median(times), "p95": pct(times, 95)}
            ),
            flush=True,
        )
    db.close()


def check_bulk(n: int) -> None:
    """A store loaded by COPY holds what one loaded by the store's inserts holds, and searches the same."""
    from nemori_cli.embed.base import identity
    from nemori_cli.retrieval.search import SearchOptions, search

    pool = load_vectors(n + n // 10)
    texts = corpus(n + n // 10)
    model = embedder()
    server = pg_server()
    stores = {}
    for bulk in (False, True):
        tag = "_copy" if bulk else "_inserts"
        (CACHE / f"built-postgresql-{n}{tag}.json").unlink(missing_ok=True)
        stores[bulk], _ = build("postgresql", n, pool, texts, identity(model), server, bulk=bulk, tag=tag)
    tables = {
        "episodes": "id, user_id, title, narrative, start_ts, end_ts, start_epoch, end_epoch, boundary, status",
        "messages": "id, user_id, msg_key, source_id, session, speaker, content, ts, ts_epoch, episode_id",
        "episode_fts": "rowid, title, narrative, user_id, tsv::text",
        "episode_vec": "rowid, user_id, embedding::text",
    }
    for table, cols in tables.items():
        a, b = (stores[k].query(f"SELECT {cols} FROM {table} ORDER BY 1") for k in (False, True))
        print(table, len(a), "rows", "same" if a == b else "DIFFERENT", flush=True)
        assert a == b, table
    for q in questions(20):
        a, b = (search(stores[k], "bench", model, q, SearchOptions(k=10))[0] for k in (False, True))
        assert [(h.kind, h.id) for h in a] == [(h.kind, h.id) for h in b], q
    print("20 searches: the same hits in the same order")


def report(paths: list[Path]) -> str:
    """Markdown tables from result JSON records (the run's --json, or the per-store result-*.json files)."""
    results = []
    for path in paths:
        data = json.loads(path.read_text())
        results += data.get("results", [data])
    results.sort(key=lambda r: (r["n"], r["engine"]))
    lines = [
        "| engine | memories (searched user + other) | vector path | vector p50 ms | p95 ms | recall@10 | exact scan p50 ms (same run) | exact / default | search without embedding p50 ms: exact / default (p95) | whole search p50 ms: exact / default (p95) | query embedding p50 ms | build s | disk MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        b = r["build"]
        auto, exact = r["auto_k10"], r["exact_k10"]
        build = f"{b['load_s']:.0f}" + (f" + {b['hnsw_build_s']:.0f} index" if "hnsw_build_s" in b else "")
        lines.append(
            f"| {r['engine']} | {r['n']:,} + {b['other_n']:,} | {r['default_path']} | "
            f"{auto['p50']:.1f} | {auto['p95']:.1f} | {auto['recall']:.3f} | {exact['p50']:.1f} | {exact['p50'] / auto['p50']:.1f}x | "
            f"{r['store_exact']['p50']:.1f} / {r['store_auto']['p50']:.1f} ({r['store_auto']['p95']:.1f}) | "
            f"{r['search_exact']['p50']:.1f} / {r['search_auto']['p50']:.1f} ({r['search_auto']['p95']:.1f}) | {r['embed_p50']:.1f} | {build} | {b['disk_mb']:.0f} |"
        )
    lines += [
        "",
        "Sweeps (vector path forced on, k = 10; SQLite: Hamming candidates rescored; PostgreSQL: HNSW candidates = ef_search, recall of the other user (9% of rows) beside):",
        "",
    ]
    lines += [
        "| engine | memories | candidates | p50 ms | p95 ms | recall@10 | other user: p50 ms | recall@10 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for row in r["sweep"]:
            other = row.get("other")
            cands = row.get("candidates", row.get("candidates_k10"))
            lines.append(
                f"| {r['engine']} | {r['n']:,} | {cands} | {row['p50']:.1f} | {row['p95']:.1f} | {row['recall']:.3f} | "
                + (f"{other['p50']:.1f} | {other['recall']:.3f} |" if other else "- | - |")
            )
    return "\n".join(lines)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    e = sub.add_parser("embed")
    e.add_argument("--count", type=int, default=110_000)
    e.add_argument("--probe", type=int, default=0, help="only time embedding this many texts, cache nothing")
    e.add_argument("--fp32", action="store_true", help="documents in float32 (default: bfloat16 autocast, see _Bf16)")
    e.add_argument("--shard", default="0/1", help="I/N: embed every N-th chunk from the I-th, on one thread (run N processes)")
    r = sub.add_parser("run")
    r.add_argument("--sizes", default="10000,100000")
    r.add_argument("--engines", default="sqlite,postgresql")
    r.add_argument("--queries", type=int, default=200)
    r.add_argument("--json", type=Path)
    r.add_argument("--exact-queries", type=int, default=0, help="time the exact scans on this many queries only (default: all)")
    r.add_argument("--store-inserts", action="store_true", help="load PostgreSQL through the store's own inserts, not COPY")
    c = sub.add_parser("check-bulk", help="load one PostgreSQL store each way and compare their rows and searches")
    c.add_argument("--size", type=int, default=2000)
    w = sub.add_parser("warm-search", help="time `nemori search` alone on a built store, several passes, no exact scan between")
    w.add_argument("--size", type=int, default=1_000_000)
    w.add_argument("--engine", default="postgresql", choices=["postgresql", "sqlite"])
    w.add_argument("--queries", type=int, default=200)
    w.add_argument("--passes", type=int, default=2)
    rep = sub.add_parser("report")
    rep.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args()
    if args.stage == "report":
        print(report(args.paths))
        return
    if args.stage == "run":
        run(
            [int(x) for x in args.sizes.split(",")],
            args.engines.split(","),
            args.queries,
            args.json,
            args.exact_queries,
            bulk=not args.store_inserts,
        )
        return
    if args.stage == "warm-search":
        warm_search(args.size, args.engine, args.queries, args.passes)
        return
    if args.stage == "check-bulk":
        check_bulk(args.size)
        return
    if args.stage == "embed":
        if args.probe:
            model = embedder()
            texts = corpus(args.probe * 2)[args.probe :]  # joined pairs, the bulk of a large corpus
            model.embed_documents(texts[:64])
            t = time.perf_counter()
            model.embed_documents(texts)
            s = time.perf_counter() - t
            print(json.dumps({"probe": len(texts), "seconds": round(s, 1), "per_s": round(len(texts) / s, 1)}))
            return
        i, n = (int(x) for x in args.shard.split("/"))
        embed(args.count, bf16=not args.fp32, shard=(i, n))


if __name__ == "__main__":
    main()
