"""What the rest of the code needs from an embedder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

import numpy as np

# What an embedder is given of one text: its first ``max_chars`` characters. A sentence-transformers model
# reads only its first max_seq_length tokens (all-MiniLM-L6-v2: 256) and drops the rest, but its tokenizer
# reads the whole text first: a 5 MB message took MiniLM's tokenizer 3.7 s and 726 MB, all of it thrown away
# (issue 42, defect 15). So a text is cut before it is tokenized, to CHARS_PER_TOKEN characters for each token
# the model reads. A token covers one character (CJK) to a few: MiniLM's 256 covered about 960 characters of
# README.md, 1,100 of Python, 620 of base64, 460 of URLs. So the cut leaves the vector as it was (only text
# padded with long runs of spaces could reach further), and embedding no longer costs more for a longer message.
CHARS_PER_TOKEN = 16
DEFAULT_MAX_CHARS = 256 * CHARS_PER_TOKEN  # an embedder that does not say how much it reads (the fake): MiniLM's


def max_chars(embedder: object) -> int:
    """The most characters of one text worth embedding: the embedder's own ``max_chars``, else DEFAULT_MAX_CHARS."""
    return int(getattr(embedder, "max_chars", DEFAULT_MAX_CHARS))


class Embedder(Protocol):
    model_name: str
    dimensions: int

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 rows, one per text."""
        ...

    def embed_query(self, text: str) -> np.ndarray: ...


def identity(embedder: Embedder) -> str:
    """What the database records, so vectors of two models are never mixed."""
    return f"{embedder.model_name}:{embedder.dimensions}"


class Serialized:
    """An embedder that several threads share, one call at a time (a fast tokenizer refuses two threads at once).

    The runner wraps its embedder in one, so that `ingest --workers N` can cut
    windows by similarity on one thread while the writer embeds on another.
    ``remembering()`` keeps, for the calling thread, the vectors already made
    (a unit of work run again after a replay, llm/inflight.ReplayBackend, embeds the
    same texts again).
    """

    def __init__(self, inner: Embedder):
        import threading

        self.inner = inner
        self.model_name, self.dimensions = inner.model_name, inner.dimensions
        self.max_chars = max_chars(inner)
        self._lock = threading.Lock()
        self._local = threading.local()

    @contextmanager
    def remembering(self) -> Iterator[None]:
        self._local.memo = {}
        try:
            yield
        finally:
            self._local.memo = None

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        memo: dict[str, np.ndarray] | None = getattr(self._local, "memo", None)
        if memo is None or not texts:
            with self._lock:
                return self.inner.embed_documents(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in memo))
        if missing:
            with self._lock:
                memo.update(zip(missing, self.inner.embed_documents(missing)))
        return np.stack([memo[t] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            return self.inner.embed_query(text)


def serialized(embedder: Embedder) -> Serialized:
    return embedder if isinstance(embedder, Serialized) else Serialized(embedder)


class Deferred:
    """An embedder made on its first use: `ask` over a core that holds everything never needs one (torch and the model stay unloaded)."""

    def __init__(self, make: Callable[[], Embedder]) -> None:
        self._make = make
        self._inner: Embedder | None = None

    @property
    def loaded(self) -> bool:
        return self._inner is not None

    def _get(self) -> Embedder:
        if self._inner is None:
            self._inner = self._make()
        return self._inner

    @property
    def model_name(self) -> str:
        return self._get().model_name

    @property
    def dimensions(self) -> int:
        return self._get().dimensions

    @property
    def max_chars(self) -> int:
        return max_chars(self._get())

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._get().embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._get().embed_query(text)
