"""sentence-transformers from a local folder; never reaches for a model hub."""

from __future__ import annotations

import os

import numpy as np

from nemori_cli.config import env_defaults_to_set
from nemori_cli.embed.base import CHARS_PER_TOKEN
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
    def __init__(self, path: str, *, model_name: str, batch_size: int = 32):
        for name, value in env_defaults_to_set(_LIBRARY_ENV).items():
            os.environ[name] = value  # a write, configuring the libraries below for this process (see _LIBRARY_ENV)
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            self.model = SentenceTransformer(path, device="cpu")
        except (OSError, ValueError) as e:
            raise ModelError(f"embedder {model_name}: cannot load {path} ({e})") from None
        self.model_name = model_name
        dims = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        dimensions = dims()
        if dimensions is None:  # a model whose size sentence-transformers cannot tell: int(None) said nothing useful
            raise ModelError(f"embedder {model_name}: {path} does not say how many dimensions its vectors have")
        self.dimensions = int(dimensions)
        self.batch_size = batch_size
        # Only this much of a text can reach the model (embed/base.py: CHARS_PER_TOKEN): every text is cut to it
        # before tokenizing, whoever passes it (a message, a query, a note), so a 50 MB one costs what 4,096 characters do.
        self.max_chars = CHARS_PER_TOKEN * int(getattr(self.model, "max_seq_length", None) or 512)

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
