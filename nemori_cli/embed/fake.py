"""A deterministic bag-of-words embedder for unit tests: similar words, similar vectors."""

from __future__ import annotations

import hashlib
import re

import numpy as np

_WORD = re.compile(r"\w+")


class FakeEmbedder:
    def __init__(self, dimensions: int = 64, model_name: str = "fake-bow"):
        self.dimensions = dimensions
        self.model_name = model_name
        self.calls: list[list[str]] = []

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dimensions, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.md5(word.encode()).digest()[:4], "little")
            v[h % self.dimensions] += 1.0
        norm = np.linalg.norm(v)
        if norm == 0:
            v[0] = 1.0
            return v
        return v / norm

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self.dimensions), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]
