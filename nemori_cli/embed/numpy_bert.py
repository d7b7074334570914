"""A question's vector from a BERT sentence-transformers folder (all-MiniLM-L6-v2's family), in float32 numpy.

Why hand-written: a fresh `nemori ask` has 3 seconds, and it must embed the question. Importing
sentence-transformers took 5.1-6.5 s on a 2-core machine (torch alone 1.3-2.2 s, then transformers,
scikit-learn...), and a fresh process from start to one question's vector 7.5 s: more than twice the
whole budget, before one token is read. This module needs only what imports in a few hundredths of a
second beside numpy: `tokenizers` (the same fast tokenizer, from the folder's tokenizer.json) and
`safetensors` (the same weights); the same fresh process takes 0.34 s (scripts/query_embed_speed.py). The model itself is small and fixed: embeddings,
LayerNorm, N encoder layers, mean pooling, L2 norm; tests/integration/test_query_embed.py holds its
vectors to sentence-transformers' own (cosine >= 0.99999). Anything else in a folder (another pooling,
an extra module, another architecture) makes `supports` say no, and sentence-transformers embeds.

Documents (batches at ingest) stay on sentence-transformers (embed/sentence.py): there the import is paid once.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

MODULES = ("Transformer", "Pooling", "Normalize")  # sentence_transformers.models.<name>, in this order
FILES = ("modules.json", "config.json", "sentence_bert_config.json", "tokenizer.json", "model.safetensors")
Pair = tuple[np.ndarray, np.ndarray]  # a linear layer's (weight, bias), a LayerNorm's (weight, bias)
_LAYER = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "attention.output.LayerNorm",
    "intermediate.dense",
    "output.dense",
    "output.LayerNorm",
)


def _json(path: Path) -> Any:
    """The file's JSON, or None where it is missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _modules(folder: Path) -> list[tuple[str, str]] | None:
    """modules.json as (class name, sub-folder) pairs, or None where it is not a list of sentence-transformers modules."""
    entries = _json(folder / "modules.json")
    if not isinstance(entries, list):
        return None
    found = []
    for entry in entries:
        kind = entry.get("type") if isinstance(entry, dict) else None
        if not isinstance(kind, str) or not kind.startswith("sentence_transformers."):
            return None
        found.append((kind.rsplit(".", 1)[-1], str(entry.get("path", ""))))
    return found


def _pooling_modes(config: dict[str, Any]) -> list[str]:
    """The pooling's modes: the new `pooling_mode` key (a name or a list), else the old `pooling_mode_*_tokens` switches."""
    if "pooling_mode" in config:
        mode = config["pooling_mode"]
        return [mode] if isinstance(mode, str) else [str(m) for m in mode] if isinstance(mode, list) else ["?"]
    return [key for key, on in config.items() if key.startswith("pooling_mode_") and on]


def _pooling(folder: Path, modules: list[tuple[str, str]]) -> dict[str, Any] | None:
    path = next((sub for name, sub in modules if name == "Pooling"), None)
    config = _json(folder / path / "config.json") if path else None
    return config if isinstance(config, dict) else None


def folder_shape(path: str | Path) -> tuple[int, int] | None:
    """(dimensions, max_seq_length) as the folder's files state them, or None where they do not say.

    Read only for a Transformer, a Pooling of one mode, and an optional Normalize: there the vector has the
    pooling's width. Any other stack (a Dense layer, two pooling modes) is left to sentence-transformers to tell.
    """
    folder = Path(path)
    modules = _modules(folder)
    if modules is None or [name for name, _ in modules] not in (list(MODULES), list(MODULES[:2])):
        return None
    pooling = _pooling(folder, modules)
    model = _json(folder / "config.json")
    sbert = _json(folder / "sentence_bert_config.json")
    if pooling is None or len(_pooling_modes(pooling)) != 1 or not isinstance(sbert, dict):
        return None
    dims = pooling.get("word_embedding_dimension", pooling.get("embedding_dimension"))
    if dims is None and isinstance(model, dict):
        dims = model.get("hidden_size")
    seq = sbert.get("max_seq_length")
    if not isinstance(dims, int) or not isinstance(seq, int) or dims <= 0 or seq <= 0:
        return None
    return dims, seq


def supports(path: str | Path) -> bool:
    """True only for what BertQueryEncoder computes exactly as sentence-transformers does; the rest is left to it."""
    folder = Path(path)
    if not all((folder / name).is_file() for name in FILES):
        return False
    modules = _modules(folder)
    shape = folder_shape(folder)
    if modules is None or shape is None or [name for name, _ in modules] != list(MODULES) or modules[0][1] != "":
        return False
    pooling = _pooling(folder, modules) or {}
    if _pooling_modes(pooling) not in (["mean"], ["pooling_mode_mean_tokens"]):
        return False
    model, sbert = _json(folder / "config.json"), _json(folder / "sentence_bert_config.json")
    if not isinstance(model, dict) or sbert.get("do_lower_case", False):  # lowercasing in Python: not done here
        return False
    prompts = _json(folder / "config_sentence_transformers.json")  # optional
    if isinstance(prompts, dict) and prompts.get("default_prompt_name"):  # a prompt put before every text: not done here
        return False
    keys = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "max_position_embeddings")
    sizes = [size for size in (model.get(key) for key in keys) if isinstance(size, int) and size > 0]
    if len(sizes) != len(keys):
        return False
    hidden, layers, heads, _, positions = sizes
    return (
        model.get("model_type") == "bert"
        and model.get("hidden_act") == "gelu"
        and model.get("position_embedding_type", "absolute") == "absolute"
        and not model.get("is_decoder", False)
        and hidden % heads == 0
        and shape == (hidden, shape[1])
        and shape[1] <= positions
        and _has_weights(folder / "model.safetensors", layers)
    )


def _has_weights(path: Path, layers: int) -> bool:
    """Whether the safetensors file holds every tensor the encoder reads (its header only: nothing is loaded)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as weights:
            keys = set(weights.keys())
    except Exception:  # a damaged header fails in the Rust reader, with its own error types
        return False
    prefix = _prefix(keys)
    return prefix is not None and all(prefix + name in keys for name in _names(layers))


def _names(layers: int) -> list[str]:
    names = [f"embeddings.{part}" for part in ("word_embeddings.weight", "position_embeddings.weight", "token_type_embeddings.weight")]
    names += ["embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"]
    return names + [f"encoder.layer.{i}.{part}.{kind}" for i in range(layers) for part in _LAYER for kind in ("weight", "bias")]


def _prefix(keys: set[str]) -> str | None:
    """A BertModel saves its tensors as "embeddings...", a model saved from a task head as "bert.embeddings..."."""
    return next((p for p in ("", "bert.") if p + "embeddings.word_embeddings.weight" in keys), None)


# GELU, as BERT's "gelu" defines it: x * Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2. numpy has no erf, and importing
# scipy.special for it cost 0.19 s beside numpy (measured), more than the whole encoder spends on a question.
# So: erfc(z) = exp(-z^2) * g(t) for z >= 0, t = 1 / (1 + z/2), where g is smooth on t in (0.25, 1]; a degree-14
# polynomial in t interpolates g at Chebyshev points, its values taken from the C library's erfc (math.erfc).
# In float64 this is within 2e-13 of Phi for every x (tests/unit/test_numpy_bert.py holds it to math.erfc),
# far below float32's resolution. Past z = 6 g is held at g(6): there exp(-z^2) < 3e-16 decides (and is 0 past z = 27).
_Z_MAX, _DEGREE = 6.0, 14
_T_LOW = 1 / (1 + _Z_MAX / 2)


def _erfc_fit() -> np.ndarray:
    nodes = np.cos(np.pi * (np.arange(_DEGREE + 1) + 0.5) / (_DEGREE + 1))  # on [-1, 1]
    t = (_T_LOW + 1) / 2 + (1 - _T_LOW) / 2 * nodes
    z = 2 * (1 / t - 1)
    g = [math.erfc(v) * math.exp(v * v) for v in z]
    return np.linalg.solve(np.vander(nodes, _DEGREE + 1), g)  # highest power first, for Horner


_G = _erfc_fit()


def gelu(x: np.ndarray) -> np.ndarray:
    """x * Phi(x) in float32, computed in float64 (see above)."""
    z = np.abs(x, dtype=np.float64)
    z *= 1 / math.sqrt(2)
    u = z * 0.5
    u += 1
    np.reciprocal(u, out=u)  # t
    u -= (_T_LOW + 1) / 2
    u *= 2 / (1 - _T_LOW)  # t mapped onto [-1, 1]
    np.maximum(u, -1, out=u)  # z > 6: g(6)
    g = np.full_like(u, _G[0])
    for coefficient in _G[1:]:
        g *= u
        g += coefficient
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    g *= z
    g *= 0.5  # Phi(-|x|)
    phi = np.where(x >= 0, 1 - g, g)
    phi *= x
    return phi.astype(np.float32)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.square(centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * weight + bias


class BertQueryEncoder:
    """One text at a time (a question): no padding, no attention mask, no batch."""

    def __init__(self, path: str | Path):
        from safetensors import safe_open
        from threadpoolctl import ThreadpoolController
        from tokenizers import Tokenizer

        folder = Path(path)
        config = _json(folder / "config.json")
        shape = folder_shape(folder)
        if not isinstance(config, dict) or shape is None:
            raise ValueError(f"{folder} is not a folder this encoder reads (see supports())")
        self.max_seq_length = shape[1]
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # tokenizer.json carries its own settings (all-MiniLM-L6-v2's: cut at 128, padded to 128); sentence-
        # transformers replaces them with its own for a call: cut at max_seq_length tokens, [CLS] and [SEP]
        # included, longest first, from the right, and one text padded to itself.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_seq_length, stride=0, strategy="longest_first", direction="right")
        # Every tensor but the word embeddings (30,522 rows: half the file) is read now; of those, a text's own rows
        # are read when it comes (_word_rows), from the memory-mapped file.
        self._path = str(folder / "model.safetensors")
        with safe_open(self._path, framework="numpy") as weights:
            prefix = _prefix(set(weights.keys())) or ""

            def w(name: str) -> np.ndarray:
                return np.ascontiguousarray(weights.get_tensor(prefix + name), dtype=np.float32)

            def linear(name: str) -> Pair:  # stored (out, in): kept as (in, out), for x @ W
                return np.ascontiguousarray(w(name + ".weight").T), w(name + ".bias")

            self._word = prefix + "embeddings.word_embeddings.weight"
            self.position = w("embeddings.position_embeddings.weight")
            self.token_type = w("embeddings.token_type_embeddings.weight")[0]  # one sequence: type 0 throughout
            self.norm = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
            self.layers: list[tuple[Pair, ...]] = []
            for i in range(int(config["num_hidden_layers"])):
                q, k, v, out, out_norm, up, down, down_norm = (linear(f"encoder.layer.{i}.{part}") for part in _LAYER)
                qkv = (np.concatenate([q[0], k[0], v[0]], axis=1), np.concatenate([q[1], k[1], v[1]]))  # one product for three
                self.layers.append((qkv, out, out_norm, up, down, down_norm))
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.heads = int(config["num_attention_heads"])
        # numpy's BLAS splits a product over every core. A question's products are small (tens of rows), and with
        # the cores busy (an ingest working behind, say) the split threads wait on each other: one question took
        # 333 ms on 2 busy cores, 16 ms on one thread (measured). So the encoder runs its products on one thread.
        self._blas = ThreadpoolController()

    def token_ids(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text).ids)

    def _word_rows(self, ids: list[int]) -> np.ndarray:
        from safetensors import safe_open

        with safe_open(self._path, framework="numpy") as weights:
            table = weights.get_slice(self._word)
            rows = {i: table[i : i + 1] for i in set(ids)}
        return np.concatenate([rows[i] for i in ids]).astype(np.float32)

    def encode(self, text: str) -> np.ndarray:
        """The unit-length float32 vector of one text, as SentenceTransformer(folder).encode(text, normalize_embeddings=True)."""
        ids = self.token_ids(text)
        with self._blas.limit(limits=1, user_api="blas"):
            x = self._word_rows(ids) + self.position[: len(ids)] + self.token_type
            x = _layer_norm(x, *self.norm, self.eps)
            for layer in self.layers:
                x = self._layer(x, *layer)
        pooled = x.mean(axis=0)  # mean pooling: every token counts, none is padding
        return (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)

    def _layer(self, x: np.ndarray, qkv: Pair, out: Pair, out_norm: Pair, up: Pair, down: Pair, down_norm: Pair) -> np.ndarray:
        n, hidden = x.shape
        size = hidden // self.heads
        q, k, v = (x @ qkv[0] + qkv[1]).reshape(n, 3, self.heads, size).transpose(1, 2, 0, 3)  # each (heads, n, size)
        scores = q @ k.transpose(0, 2, 1) / np.float32(math.sqrt(size))
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ v).transpose(1, 0, 2).reshape(n, hidden)
        x = _layer_norm(context @ out[0] + out[1] + x, *out_norm, self.eps)
        inner = gelu(x @ up[0] + up[1])
        return _layer_norm(inner @ down[0] + down[1] + x, *down_norm, self.eps)
