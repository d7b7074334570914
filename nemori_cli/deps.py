"""The composition root: settings to a session (the store, the embedder, the LLMs), and each piece on its own.

Interfaces (the CLI; later an MCP server and a Python API) open one
``Session`` and stay thin over it; the jobs (bench, doctor) use the builders.

Heavy libraries (llama_cpp, torch via sentence-transformers) are imported here
on demand, never at CLI import time, so `nemori --help` stays instant.
Every failure becomes a NemoriError naming the setting that caused it, and
happens before anything is written.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

from nemori_cli.config import (
    DEFAULT_WINDOW,
    Settings,
    api_key_from_env,
    load_presets,
    resolve_embedder,
    resolve_llm,
)
from nemori_cli.embed.base import Embedder, identity
from nemori_cli.errors import ConfigError, ModelError, ModelNotInstalled
from nemori_cli.llm.base import ChatBackend, StructuredLLM
from nemori_cli.modelfiles import embedder_path, gguf_path
from nemori_cli.presets import DEFAULT_N_CTX, LLMPreset
from nemori_cli.store.contract import Store

if TYPE_CHECKING:
    from nemori_cli.llm.llamacpp import LlamaCppBackend
    from nemori_cli.llm.openai_compat import OpenAICompatBackend
    from nemori_cli.memory.amem import AmemSettings
    from nemori_cli.memory.mode import MemoryMode
    from nemori_cli.memory.profile import Profile
    from nemori_cli.pipeline.runner import Pipeline

# One model object per process, per preset: both kinds take a new --parallel when reused.
_backends: dict[str, LlamaCppBackend | OpenAICompatBackend] = {}

T = TypeVar("T")


def may_install(settings: Settings) -> bool:
    """Whether a missing built-in model is installed by the command that needs it (config.Settings.install_models)."""
    if settings.install_models != "terminal":
        return settings.install_models == "yes"
    streams = (sys.stdin, sys.stderr)
    return all(s is not None and s.isatty() for s in streams)


def _installed(settings: Settings, find: Callable[[], T]) -> T:
    """``find()``, after installing the preset's packages if they are missing and the settings allow it."""
    try:
        return find()
    except ModelNotInstalled as missing:
        if not may_install(settings):
            raise
        from nemori_cli.model_install import install

        install(missing, say=lambda line: print(line, file=sys.stderr, flush=True))
        return find()


def open_db(settings: Settings, *, create: bool = True) -> Store:
    """The store: the SQLite file, or the PostgreSQL server --db names (store/target.py)."""
    return settings.store.open(create=create)


def cannot_write(settings: Settings) -> bool:
    """Whether this process may not write the store (a SQLite file or its folder; root may always; a server decides for itself)."""
    return settings.store.cannot_write()


def store_exists(settings: Settings) -> bool:
    """Whether the store is there already (a server is asked only when the store is opened; it counts as there)."""
    return settings.store.exists()


def llm_preset(settings: Settings) -> LLMPreset:
    return resolve_llm(load_presets(), settings.model)


def build_eta(settings: Settings, db: Store, *, window: int = DEFAULT_WINDOW):
    """A BuildState's estimate (pipeline/built.Eta): the model time a backlog needs at the best-known rates of the model that builds."""
    from nemori_cli.estimate import estimate

    try:
        rates = build_rates(settings, db)
    except ConfigError:
        return None  # a model named that no preset knows: no estimate, and nothing else refused for it here

    def eta(backlog, profile) -> tuple[float, str]:
        if not backlog.messages:
            return 0.0, rates.source
        return estimate(backlog.messages, backlog.characters, window=window, profile=profile, rates=rates).seconds, rates.source

    return eta


def build_rates(settings: Settings, db: Store | None):
    """The best-known rates of the model that builds memory (rates.best), for estimates; nothing is loaded."""
    from nemori_cli import rates

    preset = llm_preset(settings)
    return rates.best(db, settings.user, rates.model_id(preset), preset.name, cache_dir=settings.cache_dir)


def build_backend(preset: LLMPreset, settings: Settings) -> ChatBackend:
    cached = _backends.get(preset.name)
    if cached is not None:
        cached.parallel = settings.parallel  # the one setting a command may change on a loaded model
        return cached
    backend: LlamaCppBackend | OpenAICompatBackend
    if preset.kind == "openai":
        from nemori_cli.llm.openai_compat import OpenAICompatBackend

        key = api_key_from_env(preset.api_key_env)
        backend = OpenAICompatBackend(
            name=preset.name,
            base_url=preset.base_url or "",
            model=preset.model or "",
            api_key=key,
            timeout=preset.timeout,
            connect_timeout=preset.connect_timeout,
            parallel=settings.parallel,
        )
        backend.check_reachable()
    else:
        from nemori_cli.llm.llamacpp import LlamaCppBackend

        path = _installed(settings, lambda: gguf_path(preset, settings.cache_dir))
        backend = LlamaCppBackend(
            path,
            name=preset.name,
            n_ctx=preset.n_ctx,
            n_threads=settings.threads,
            prefix_cache=settings.prefix_cache,
            parallel=settings.parallel,
            lookup=settings.lookup,
            flash_attn=preset.flash_attn,
        )
    _backends[preset.name] = backend
    return backend


def new_memory_defaults(settings: Settings) -> dict:
    """What a new database takes from the model that builds it (memory/method.resolve's ``new``): its partition method."""
    return {"partition": llm_preset(settings).partition}


def build_llm(settings: Settings) -> StructuredLLM:
    return StructuredLLM(build_backend(llm_preset(settings), settings))


def answer_preset(settings: Settings) -> LLMPreset:
    """The model that answers: --answer-model, else models.toml's default_answer_llm, else the memory's model."""
    presets = load_presets()
    return resolve_llm(presets, settings.answer_model or presets.default_answer_llm or settings.model)


def build_answer_llm(settings: Settings, memory_llm: StructuredLLM | None = None) -> StructuredLLM:
    """The answer model; the memory model's own object when they are the same preset (one model loaded)."""
    preset = answer_preset(settings)
    if memory_llm is not None and preset.name == llm_preset(settings).name:
        return memory_llm
    return StructuredLLM(build_backend(preset, settings))


def check_embedder_files(settings: Settings) -> None:
    """Fail on an unknown or missing embedder before a new database file is created."""
    preset = resolve_embedder(load_presets(), settings.embedder)
    _installed(settings, lambda: embedder_path(preset))


def check_embedder_preset(settings: Settings, db: Store | None = None):
    """The embedder preset, refused if unknown or if the database was built with another one; nothing loads."""
    preset = resolve_embedder(load_presets(), settings.embedder)
    if db is not None and preset.dimensions:
        db.check_embedder(f"{preset.model_name}:{preset.dimensions}")
    return preset


def build_embedder(settings: Settings, db: Store | None = None) -> Embedder:
    """The embedder, refused early if the database was built with another one."""
    preset = check_embedder_preset(settings, db)
    from nemori_cli.embed.sentence import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(_installed(settings, lambda: embedder_path(preset)), model_name=preset.model_name)
    if preset.dimensions and embedder.dimensions != preset.dimensions:
        raise ModelError(f"embedder {preset.name}: model has {embedder.dimensions} dimensions, preset says {preset.dimensions}")
    if db is not None:
        db.check_embedder(identity(embedder))
    return embedder


def core_cache(settings: Settings):
    """Where the core context's KV states of this store are saved: beside the SQLite file, or in the cache for a server."""
    from nemori_cli.retrieval.core_cache import CoreCache

    return CoreCache(settings.store.kv_cache_dir(settings.cache_dir))


def answer_window(settings: Settings, llm: StructuredLLM) -> int:
    """The answer model's context window in tokens: the loaded model's own, else its preset's."""
    return getattr(llm.backend, "n_ctx", None) or getattr(answer_preset(settings), "n_ctx", None) or DEFAULT_N_CTX


def semantic_settings(settings: Settings):
    """The prediction-error settings, with tau taken from the embedder's preset."""
    from nemori_cli.memory.semantic import SemanticSettings

    return SemanticSettings(threshold=resolve_embedder(load_presets(), settings.embedder).evoke_threshold)


class Session:
    """What one command works with, each piece built on first use, in the order the command needs.

    The order is the command's because it decides what fails first: ingest
    loads the model before it creates a database file, so a missing model or
    a dead endpoint leaves no empty file behind. ``create`` allows a new
    database file (checked to be embeddable first).
    """

    def __init__(self, settings: Settings, *, create: bool = False, write: bool = False):
        self.settings, self.create, self.write = settings, create, write
        # Every command, reads too, before an embedder or a model loads; one that writes learns now that it cannot.
        settings.store.refuse(create=create, write=write)

    @property
    def user(self) -> str:
        return self.settings.user

    @cached_property
    def db(self) -> Store:
        if self.create and not store_exists(self.settings):
            check_embedder_files(self.settings)  # a new file is not created for a run that cannot embed
        if not (self.create or self.write) and cannot_write(self.settings):
            return self.settings.store.open(create=False, read_only=True)  # a read of a file in a read-only folder
        return open_db(self.settings, create=self.create)

    @cached_property
    def embedder(self) -> Embedder:
        return build_embedder(self.settings, self.db)

    @cached_property
    def llm(self) -> StructuredLLM:
        """The model that builds memory (--model)."""
        return build_llm(self.settings)

    @cached_property
    def answer_llm(self) -> StructuredLLM:
        """The model that answers; the memory model itself when it is the same preset, if that one is loaded."""
        return build_answer_llm(self.settings, self.__dict__.get("llm"))

    def check_answer_model(self) -> None:
        """Refuse an unknown answer preset before anything loads."""
        answer_preset(self.settings)

    def check_answer_endpoint(self) -> None:
        """An answer model that is an endpoint is probed now, before the embedder loads: a dead one fails at once, not after that load.

        Only an endpoint: a GGUF model is loaded after the embedder, which is cheaper and may be refused first.
        """
        if answer_preset(self.settings).kind == "openai":
            _ = self.answer_llm

    @cached_property
    def core_cache(self):
        return core_cache(self.settings)

    @property
    def mode(self) -> MemoryMode:
        from nemori_cli.memory.method import mode_of

        return mode_of(self.db)

    def pipeline(self, profile: Profile, *, window: int = DEFAULT_WINDOW, notes: AmemSettings | None = None) -> Pipeline:
        """The ingest runner for this session's user, with the settings taken from presets."""
        from nemori_cli.memory.amem import AmemSettings
        from nemori_cli.pipeline.runner import Pipeline

        # stop_when_every_call_fails: a model that answers nothing usable stops the run, the work pending (runner.py).
        return Pipeline(
            self.db,
            self.user,
            self.llm,
            self.embedder,
            window=window,
            profile=profile,
            semantic=semantic_settings(self.settings),
            notes=notes or AmemSettings(),
            stop_when_every_call_fails=True,
        )

    def close(self) -> None:
        if "db" in self.__dict__:
            self.db.close()


def session(settings: Settings, *, create: bool = False, write: bool = False) -> Session:
    """The one call an interface makes; ``create`` allows a new file, ``write`` says the command writes to an existing one."""
    return Session(settings, create=create, write=write)
