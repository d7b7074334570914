"""Vector search over a large user's sign bits: read straight from sqlite-vec's vec0 storage.

Above QUANTISED_MIN_ROWS vectors of one user, the SQLite engine's
vector_search scans sign bits (a bit[N] vec0 table beside each float one,
"{table}_bits") by Hamming distance and rescores the best
QUANTISED_OVERSAMPLE * k exactly by cosine; below it, the exact float scan
(docs/SEARCH_LATENCY.md, "Large stores", has the figures and the command).

The bits are read from vec0's shadow tables, which are sqlite-vec's private
layout: sqlite-vec is pinned in pyproject.toml, the layout is checked once
per connection (a different one falls back to vec0's own KNN query), and
tests/unit/test_vector_index.py fails loudly when a new version changes it.
"""

from __future__ import annotations

import numpy as np

from nemori_cli.store.contract import Row, Store

QUANTISED_MIN_ROWS = 5_000
QUANTISED_OVERSAMPLE = 20
QUANTISED_MIN_CANDIDATES = 200

_POPCOUNT = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1).astype(np.uint8)  # set bits of each byte


class QuantisedSearch:
    """One store's sign-bit search; remembers, per quantised table, how its vec0 storage is laid out."""

    def __init__(self, store: Store):
        self._store = store
        # per quantised table: True, laid out as read below; False, another layout (vec0's KNN then);
        # None, no such table (a file opened read-only before its upgrade)
        self.layout: dict[str, bool | None] = {}

    def search(self, table: str, user: str, query: np.ndarray, k: int) -> list[tuple[int, float]] | None:
        """Hamming scan of the user's sign bits, then the best candidates rescored exactly; None: take the exact scan.

        The bits are read straight from the quantised table's vec0 storage
        (chunks of 1024: a validity bitmap, the rowids, the packed bits) and
        compared in numpy: vec0's own KNN keeps its top k by repeated passes,
        which costs more than the scan itself for the ~200 candidates wanted.
        A sqlite-vec whose storage differs (checked once per connection) gets
        the same candidates from vec0's KNN query instead.
        """
        bits = f"{table}_bits"
        if bits not in self.layout:
            chunk_cols = set(self._store.columns(f"{bits}_chunks"))
            if not chunk_cols:
                self.layout[bits] = None  # no quantised table (a file opened read-only before its upgrade)
            else:
                self.layout[bits] = (
                    {"partition00", "validity", "rowids", "size"} <= chunk_cols
                    and {"rowid", "vectors"} <= set(self._store.columns(f"{bits}_vector_chunks00"))
                    and {"rowid", "value00"} <= set(self._store.columns(f"{bits}_auxiliary"))
                )
        layout = self.layout[bits]
        if layout is None:
            return None
        want = max(k * QUANTISED_OVERSAMPLE, QUANTISED_MIN_CANDIDATES)
        packed = np.packbits(query > 0, bitorder="little")  # vec_quantize_binary's bits: 1 where positive, lowest bit first
        if layout:
            chunks = self._store.query(
                f'SELECT c.size AS size, c.validity AS validity, c.rowids AS rowids, v.vectors AS vectors FROM "{bits}_chunks" c'
                f' JOIN "{bits}_vector_chunks00" v ON v.rowid = c.chunk_id WHERE c.partition00 = ?',
                (user,),
            )
            if not chunks:
                return None
            ids_all, distance = chunk_distances(chunks, packed)
            if len(ids_all) < QUANTISED_MIN_ROWS:
                return None
            if len(ids_all) > want:
                top = np.argpartition(distance, want)[:want]
                candidates = ids_all[top]
            else:
                candidates = ids_all
        else:
            if int(self._store.scalar(f"SELECT count(*) AS n FROM {bits} WHERE user_id = ?", (user,))) < QUANTISED_MIN_ROWS:
                return None
            rows = self._store.query(
                f"SELECT rowid FROM {bits} WHERE embedding MATCH vec_bit(?) AND k = ? AND user_id = ?",
                (packed.tobytes(), want, user),
            )
            candidates = np.asarray([int(r["rowid"]) for r in rows], dtype=np.int64)
        return self._rescore(bits, candidates, query, k, direct=layout)

    def _rescore(self, bits: str, candidates: np.ndarray, query: np.ndarray, k: int, *, direct: bool) -> list[tuple[int, float]]:
        """The candidates' float vectors (rowid lookups of the auxiliary column), ranked by exact cosine."""
        if len(candidates) == 0:
            return []
        source = f'SELECT rowid, value00 AS vector FROM "{bits}_auxiliary"' if direct else f"SELECT rowid, vector FROM {bits}"
        rows = self._store.query(f"{source} WHERE rowid IN ({','.join('?' * len(candidates))})", tuple(int(i) for i in candidates))
        ids = np.asarray([int(r["rowid"]) for r in rows], dtype=np.int64)
        vectors = np.frombuffer(b"".join(r["vector"] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        q = query / (np.linalg.norm(query) or 1.0)
        similarity = (vectors @ q) / np.maximum(np.linalg.norm(vectors, axis=1), 1e-12)
        order = np.lexsort((ids, -similarity))[:k]  # best first; ties by row id
        return [(int(ids[i]), float(similarity[i])) for i in order]


def chunk_distances(chunks: list[Row], packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row ids, Hamming distances to ``packed``) of the filled slots of vec0 chunks.

    A table's chunks all have one size, so their blobs are joined and read as
    one array, not in a Python loop per chunk of 1,024 (at 1M rows, a
    thousand iterations per search; the gain was not measured on its own);
    chunks of differing sizes are read one by one.
    """
    sizes = {int(c["size"]) for c in chunks}
    if len(sizes) == 1:
        size, n = sizes.pop(), len(chunks)
        valid = np.unpackbits(
            np.frombuffer(b"".join(c["validity"] for c in chunks), dtype=np.uint8).reshape(n, -1), axis=1, bitorder="little"
        )
        valid = valid[:, :size].astype(bool).ravel()
        ids = np.frombuffer(b"".join(c["rowids"] for c in chunks), dtype=np.int64).reshape(n, -1)[:, :size].ravel()
        codes = np.frombuffer(b"".join(c["vectors"] for c in chunks), dtype=np.uint8).reshape(n * size, -1)
        return ids[valid], _hamming(codes, packed)[valid]
    id_parts: list[np.ndarray] = []
    distance_parts: list[np.ndarray] = []
    for c in chunks:
        size = int(c["size"])
        valid = np.unpackbits(np.frombuffer(c["validity"], dtype=np.uint8), bitorder="little")[:size].astype(bool)
        id_parts.append(np.frombuffer(c["rowids"], dtype=np.int64)[:size][valid])
        distance_parts.append(_hamming(np.frombuffer(c["vectors"], dtype=np.uint8).reshape(size, -1)[valid], packed))
    return np.concatenate(id_parts), np.concatenate(distance_parts)


def _hamming(codes: np.ndarray, packed: np.ndarray) -> np.ndarray:
    """Differing bits between each row of ``codes`` (packed bits, one row per vector) and ``packed``."""
    xor = codes ^ packed
    if hasattr(np, "bitwise_count") and xor.shape[1] % 8 == 0:  # numpy 2: a popcount instruction over 64-bit words
        counted: np.ndarray = np.bitwise_count(xor.view(np.uint64)).sum(axis=1, dtype=np.int32)  # numpy's stubs: Any
        return counted
    looked_up: np.ndarray = _POPCOUNT[xor].sum(axis=1, dtype=np.int32)
    return looked_up
