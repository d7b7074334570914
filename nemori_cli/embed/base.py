"""What the rest of the code needs from an embedder."""

from __future__ import annotations

from typing import Protocol

import numpy as np


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
