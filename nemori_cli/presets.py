"""The model presets as nemori uses them: records only, below config.py (which finds and reads the files) and preset_schema.py (which checks them)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_N_CTX = 4096  # a GGUF model's context window in tokens when its preset does not say


@dataclass(frozen=True)
class LLMPreset:
    name: str
    kind: str  # "gguf" | "openai"
    description: str = ""
    path: str | None = None  # gguf: a file of the user's
    parts: tuple[str, ...] = ()  # gguf: files inside installed packages, concatenated
    packages: tuple[str, ...] = ()  # pip requirements that provide `parts`
    download_mb: int | None = None  # what installing `packages` downloads, said before an install starts
    sha256: str | None = None
    n_ctx: int = DEFAULT_N_CTX
    base_url: str | None = None  # openai
    model: str | None = None  # openai
    api_key_env: str | None = None  # openai: the NAME of the variable holding the key
    timeout: float = 120.0  # openai: seconds to wait for one answer (a slow CPU server needs long)
    connect_timeout: float = 5.0  # openai: seconds to wait for the connection itself
    # How a new memory built with this model cuts episodes: "model" (the LLM proposes boundaries, the
    # paper's way) or "similarity" (embeddings alone, no call: for small models, whose boundaries are noise).
    partition: str = "model"
    # gguf: llama.cpp's flash attention. On 2 CPU cores it read a prompt 14-23% faster (more the longer the
    # cached prefix) for `small` (docs/BEYOND.md, scripts/attn_speed.py), but its sums depend on how a prompt was
    # read: an answer after a saved KV state, or decoded beside others, then differs from one read whole (tiny:
    # "Priya" against "Priya, Maya"). Off by default, so a cached core answers exactly as reading it again.
    flash_attn: bool = False


@dataclass(frozen=True)
class EmbedderPreset:
    name: str
    kind: str  # "sentence-transformers"
    model_name: str
    dimensions: int | None = None
    description: str = ""
    path: str | None = None
    parts: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    download_mb: int | None = None
    # The paper's tau (cosine above which a known fact is "evoked" by an
    # episode) depends on the embedder's similarity scale; see models.toml.
    evoke_threshold: float = 0.70


@dataclass(frozen=True)
class Presets:
    llms: dict[str, LLMPreset]
    embedders: dict[str, EmbedderPreset]
    default_llm: str
    default_embedder: str
    sources: tuple[str, ...] = ()
    default_answer_llm: str | None = None  # None: the model that builds the memory answers too
