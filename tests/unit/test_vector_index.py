"""Vector search on big stores: SQLite's quantised scan with exact rescoring, PostgreSQL's HNSW index.

Both engines answer exactly below their size thresholds; above them the
answers must stay close to exact (recall@10), every insert and delete must
reach the quantised copy, and a user with few rows in a big table still gets
exact answers.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import forget, sqlite_vectors
from nemori_cli.store import messages as message_sql
from nemori_cli.store.sqlite import SqliteStore
from tests.conftest import make_messages

DIMS = 64


def _clustered(n: int, seed: int = 0, clusters: int = 60) -> np.ndarray:
    """Unit vectors around ``clusters`` topics, as sentence embeddings are (random directions would be the worst case for sign bits)."""
    centres = np.random.default_rng(100).standard_normal((clusters, DIMS)).astype(np.float32)  # the same topics in every call
    rng = np.random.default_rng(seed)
    v = centres[rng.integers(0, clusters, n)] + 0.9 * rng.standard_normal((n, DIMS)).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _exact(vectors: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    sims = vectors @ (query / np.linalg.norm(query))
    return [int(ids[i]) for i in np.argsort(-sims, kind="stable")[:k]]


def _fill(db, user_rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    db.bind_embedder("test:64", DIMS)
    ids, next_id = {}, 1
    with db.transaction():
        for user, vectors in user_rows.items():
            ids[user] = np.arange(next_id, next_id + len(vectors))
            for rowid, v in zip(ids[user], vectors):
                db.insert_vector("episode_vec", int(rowid), user, v)
            next_id += len(vectors)
    return ids


@pytest.fixture
def small_thresholds(monkeypatch):
    """Thresholds a unit test can pass with a few thousand rows."""
    from nemori_cli.store import pg

    monkeypatch.setattr(sqlite_vectors, "QUANTISED_MIN_ROWS", 1000)
    monkeypatch.setattr(pg, "HNSW_MIN_ROWS", 1000)


def test_the_fast_path_finds_nearly_what_exact_search_finds(db, small_thresholds):
    vectors = _clustered(3000)
    ids = _fill(db, {"u": vectors})["u"]
    queries = _clustered(30, seed=1)
    hits = 0
    for q in queries:
        got = db.vector_search("episode_vec", "u", q, 10)
        assert len(got) == 10
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        hits += len({i for i, _ in got} & set(_exact(vectors, ids, q, 10)))
    assert hits / (10 * len(queries)) >= 0.9


def test_similarities_are_exact_cosines(db, small_thresholds):
    vectors = _clustered(1500)
    ids = _fill(db, {"u": vectors})["u"]
    q = _clustered(1, seed=2)[0]
    by_id = dict(zip(ids.tolist(), vectors))
    for rowid, similarity in db.vector_search("episode_vec", "u", q, 10):
        assert similarity == pytest.approx(float(by_id[rowid] @ q), abs=1e-5)


def test_small_stores_and_small_users_get_exact_answers(db, small_thresholds):
    """Below the threshold, and for a user with few rows beside a big one, the answer is the exact one."""
    big, few = _clustered(2500), _clustered(40, seed=3)
    ids = _fill(db, {"big": big, "few": few})
    for q in _clustered(5, seed=4):
        got = db.vector_search("episode_vec", "few", q, 10)
        assert [i for i, _ in got] == _exact(few, ids["few"], q, 10)


def test_within_is_searched_exactly(db, small_thresholds):
    from nemori_cli.store.asof import Within

    vectors = _clustered(2000)
    ids = _fill(db, {"u": vectors})["u"]
    chosen = ids[::7]
    within = Within(" UNION ".join(f"SELECT {int(i)}" for i in chosen), ())
    q = _clustered(1, seed=5)[0]
    got = db.vector_search("episode_vec", "u", q, 5, within)
    assert [i for i, _ in got] == _exact(vectors[::7], chosen, q, 5)


def test_forget_and_merges_leave_no_row_in_the_quantised_table(tmp_path):
    db = SqliteStore(tmp_path / "m.db")
    db.bind_embedder("test:64", DIMS)
    vectors = _clustered(3)
    with db.transaction():
        made = []
        for i, v in enumerate(vectors):
            message_sql.insert_messages(db, "u", make_messages(2, topic=f"t{i}"))
            mids = tuple(m.id for m in message_sql.pending(db, "u"))[-2:]
            draft = episode_sql.EpisodeDraft(f"title {i}", f"story {i}", datetime(2023, 1, 1), datetime(2023, 1, 1), "model", mids)
            made.append(episode_sql.add(db, "u", draft, v))
    assert db.one("SELECT count(*) AS n FROM episode_vec_bits")["n"] == 3
    with db.transaction():
        episode_sql.supersede(db, "u", [made[0]], made[1], "merged")
    with db.transaction():
        forget.forget_episode(db, "u", made[2])
    left = {r["rowid"] for r in db.query("SELECT rowid FROM episode_vec_bits")}
    assert left == {made[1]}
    assert {r["rowid"] for r in db.query("SELECT rowid FROM episode_vec_bits_auxiliary")} == {made[1]}
    with db.transaction():
        forget.forget_user(db, "u")
    assert db.one("SELECT count(*) AS n FROM episode_vec_bits")["n"] == 0
    assert db.one("SELECT count(*) AS n FROM episode_vec_bits_auxiliary")["n"] == 0
    db.close()


def test_a_quantised_table_out_of_step_is_rebuilt_on_open(tmp_path):
    """A file whose quantised copy lost rows (an older nemori, a restored export) gets it rebuilt from the float vectors."""
    db = SqliteStore(tmp_path / "m.db")
    ids = _fill(db, {"u": _clustered(50)})["u"]
    with db.transaction():
        db.conn.execute("DELETE FROM episode_vec_bits WHERE rowid < 20")
    db.close()
    db = SqliteStore(tmp_path / "m.db")
    assert db.one("SELECT count(*) AS n FROM episode_vec_bits")["n"] == len(ids)
    db.close()


def test_the_quantised_scan_reads_vec0_storage_as_sqlite_vec_writes_it(tmp_path, monkeypatch):
    """The direct read of the bit chunks and vec0's own Hamming KNN pick the same candidates."""
    monkeypatch.setattr(sqlite_vectors, "QUANTISED_MIN_ROWS", 500)
    db = SqliteStore(tmp_path / "m.db")
    vectors = _clustered(1200)
    _fill(db, {"u": vectors, "v": _clustered(700, seed=9)})
    q = _clustered(1, seed=6)[0]
    direct = db.vector_search("episode_vec", "u", q, 10)
    # Loud, not a silent fallback: the scan reads vec0's private shadow tables (store/sqlite.py), so a
    # sqlite-vec that lays them out otherwise must fail here before the pin in pyproject.toml moves.
    assert db.quantised.layout == {"episode_vec_bits": True}, "sqlite-vec's vec0 storage layout changed: see store/sqlite_vectors.py"
    db.quantised.layout = {"episode_vec_bits": False}  # as for a sqlite-vec whose storage differs
    through_knn = db.vector_search("episode_vec", "u", q, 10)
    assert [i for i, _ in direct] == [i for i, _ in through_knn]
    db.close()


def test_postgresql_vector_tables_have_hnsw_indexes(db):
    if db.engine != "postgresql":
        pytest.skip("PostgreSQL only: HNSW indexes")
    db.bind_embedder("test:64", DIMS)
    names = {r["name"] for r in db.query("SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema()")}
    assert {"episode_vec_hnsw", "fact_vec_hnsw", "note_vec_hnsw", "message_vec_hnsw"} <= names


def test_sqlite_small_store_uses_the_exact_scan(tmp_path, monkeypatch):
    """Below QUANTISED_MIN_ROWS the quantised table is not consulted at all."""
    db = SqliteStore(tmp_path / "m.db")
    vectors = _clustered(200)
    ids = _fill(db, {"u": vectors})["u"]
    with db.transaction():
        db.conn.execute("DELETE FROM episode_vec_bits")  # would starve the fast path, were it taken
    q = _clustered(1, seed=7)[0]
    assert [i for i, _ in db.vector_search("episode_vec", "u", q, 10)] == _exact(vectors, ids, q, 10)
    db.close()


def test_deleted_rows_in_many_chunks_are_never_candidates(tmp_path, monkeypatch):
    """Holes left by deletes (vec0's validity bits) across several chunks: the direct read agrees with vec0's own KNN."""
    monkeypatch.setattr(sqlite_vectors, "QUANTISED_MIN_ROWS", 500)
    db = SqliteStore(tmp_path / "m.db")
    ids = _fill(db, {"u": _clustered(2600), "v": _clustered(300, seed=3)})["u"]  # three chunks of 1,024 for u
    gone = [int(i) for i in ids[::7]]
    with db.transaction():
        db.delete_vectors("episode_vec", gone)
    for seed in (6, 7, 8):
        q = _clustered(1, seed=seed)[0]
        db.quantised.layout = {}
        direct = db.vector_search("episode_vec", "u", q, 20)
        db.quantised.layout = {"episode_vec_bits": False}
        through_knn = db.vector_search("episode_vec", "u", q, 20)
        assert [i for i, _ in direct] == [i for i, _ in through_knn]
        assert not set(gone) & {i for i, _ in direct}
    db.close()


def test_chunks_of_one_size_are_read_as_one_array_with_the_same_result():
    rng = np.random.default_rng(1)
    packed = rng.integers(0, 256, 8, dtype=np.uint8)

    def chunk(size, first, filled):
        valid = np.zeros(size, dtype=np.uint8)
        valid[filled] = 1
        return {
            "size": size,
            "validity": np.packbits(valid, bitorder="little").tobytes(),
            "rowids": np.arange(first, first + size, dtype=np.int64).tobytes(),
            "vectors": rng.integers(0, 256, (size, 8), dtype=np.uint8).tobytes(),
        }

    def brute(chunks):
        out = {}
        for c in chunks:
            size = c["size"]
            valid = np.unpackbits(np.frombuffer(c["validity"], dtype=np.uint8), bitorder="little")[:size]
            codes = np.frombuffer(c["vectors"], dtype=np.uint8).reshape(size, -1)
            for j in range(size):
                if valid[j]:
                    out[first_id(c) + j] = int(np.unpackbits(codes[j] ^ packed).sum())
        return out

    def first_id(c):
        return int(np.frombuffer(c["rowids"], dtype=np.int64)[0])

    same = [chunk(16, 1, [0, 3, 4, 15]), chunk(16, 17, list(range(10)))]
    mixed = same + [chunk(8, 33, [1, 2])]
    for chunks in (same, mixed):
        ids, distances = sqlite_vectors.chunk_distances(chunks, packed)
        assert dict(zip(ids.tolist(), distances.tolist())) == brute(chunks)
