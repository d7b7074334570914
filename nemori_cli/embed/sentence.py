"""sentence-transformers from a local folder; never reaches for a model hub."""

from __future__ import annotations

import os
from functools import cached_property
from typing import Any

import numpy as np

from nemori_cli.config import env_defaults_to_set
from nemori_cli.embed.base import CHARS_PER_TOKEN
from nemori_cli.embed.numpy_bert import BertQueryEncoder, folder_shape, supports
from nemori_cli.errors import ModelError

# Set for the libraries imported below, before they are imported, unless the
# user set them already (config.py does the reading; this module only writes).
_LIBRARY_ENV = {
    # Offline by construction: a missing file must fail here, not hang on a network call.
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    # A CLI's stderr is for errors: no weight-loading bars or hub chatter.
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TOKENIZERS_PARALLELISM": "false",
}


class SentenceTransformerEmbedder:
    """Documents through sentence-transformers; a question through embed/numpy_bert.py where the folder allows it.

    sentence-transformers (and torch with it) is imported on the first batch of documents, not before: a fresh
    `ask` embeds one question, and importing it costs more than that whole command may take (numpy_bert.py).
    """

    def __init__(self, path: str, *, model_name: str, batch_size: int = 32):
        for name, value in env_defaults_to_set(_LIBRARY_ENV).items():
            os.environ[name] = value  # a write, configuring the libraries below for this process (see _LIBRARY_ENV)
        self.path, self.model_name, self.batch_size = path, model_name, batch_size
        self._numpy_query = supports(path)
        shape = folder_shape(path)
        if shape is None:  # the folder's files do not say: sentence-transformers is asked now, as it always was
            dimensions = _dimensions(self.model)
            if dimensions is None:  # a model whose size sentence-transformers cannot tell: int(None) said nothing useful
                raise ModelError(f"embedder {model_name}: {path} does not say how many dimensions its vectors have")
            shape = int(dimensions), int(getattr(self.model, "max_seq_length", None) or 512)
        self.dimensions, max_seq_length = shape
        # Only this much of a text can reach the model (embed/base.py: CHARS_PER_TOKEN): every text is cut to it
        # before tokenizing, whoever passes it (a message, a query, a note), so a 50 MB one costs what 4,096 characters do.
        self.max_chars = CHARS_PER_TOKEN * max_seq_length

    @cached_property
    def model(self) -> Any:
        """The SentenceTransformer, loaded on first use."""
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            model = SentenceTransformer(self.path, device="cpu")
        except (OSError, ValueError) as e:
            raise ModelError(f"embedder {self.model_name}: cannot load {self.path} ({e})") from None
        said = getattr(self, "dimensions", None)  # read from the folder's files, when they said it
        if said is not None and _dimensions(model) not in (None, said):
            raise ModelError(f"embedder {self.model_name}: {self.path} makes {_dimensions(model)}-dimension vectors, its files say {said}")
        return model

    @cached_property
    def query_encoder(self) -> BertQueryEncoder:
        """The numpy encoder of one question (only where supports(path) said yes), loaded on first use."""
        try:
            return BertQueryEncoder(self.path)
        except Exception as e:  # the tokenizer and safetensors readers (Rust) raise their own error types
            raise ModelError(f"embedder {self.model_name}: cannot load {self.path} ({e})") from None

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        vectors = self.model.encode(
            [t[: self.max_chars] for t in texts],
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors.astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        if self._numpy_query:
            return self.query_encoder.encode(text[: self.max_chars])
        # One short text: calling the module stack directly skips encode()'s
        # batching machinery, a sizeable share of a query's time on a CPU.
        import torch

        with torch.inference_mode():
            # sentence-transformers 6 renamed tokenize() to preprocess().
            prepare = getattr(self.model, "preprocess", None) or self.model.tokenize
            features = prepare([text[: self.max_chars]])
            vector = self.model(features)["sentence_embedding"]
            vector = torch.nn.functional.normalize(vector, dim=1)
        return vector[0].cpu().numpy().astype(np.float32)


def _dimensions(model: Any) -> int | None:
    """How wide the model's vectors are, as sentence-transformers tells (its method was renamed in version 6)."""
    dims = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return dims()
