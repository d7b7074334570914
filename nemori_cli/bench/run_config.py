"""A bench run's configuration: its models and systems, checked, and the record that says what was run.

What `bench locomo` and `bench longmemeval` settle before any model loads: a
missing file, an unknown system or preset, or a folder holding another run's
configuration is refused here. The record (config.json) names the data by
its sha256, the models, the systems, the versions and the commit.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from dataclasses import replace
from importlib import metadata
from pathlib import Path

from nemori_cli.errors import InputError

# What a folder's earlier run must share with this one to be resumed (systems, samples and caps may differ).
# The judge is not part of it: its labels are records of their own (`nemori bench judge`).
IDENTITY = ("benchmark", "data", "model", "embedder", "scope_key", "store_engine")
VERSIONED = ("llama_cpp_python", "sentence-transformers", "torch", "sqlite-vec", "apsw", "pydantic", "nltk")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5)
        return done.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _versions(nemori: str) -> dict:
    out: dict[str, str | None] = {
        "nemori": nemori,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {platform.system()}, {os.cpu_count()} CPUs, {_cpu_name()}",
    }
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def model_info(preset) -> dict:
    return {
        "name": preset.name,
        "kind": preset.kind,
        "sha256": preset.sha256,
        "path": preset.path,
        "n_ctx": preset.n_ctx,
        "base_url": preset.base_url,
        "model": preset.model,
    }


def prepare(
    settings,
    judge_model: str | None,
    file: Path,
    benchmark: str,
    systems_arg: str,
    scope: str,
    scope_key: dict,
    out: Path,
    answer_model: str | None = None,
    stores=None,
    *,
    version: str,
):
    """The shared models, the chosen systems and the run's configuration.

    Everything that can be refused (a missing file, an unknown system or
    preset, a folder holding another configuration) is refused before any
    model is loaded or anything is written. ``version`` is nemori's own, for the record.
    """
    from nemori_cli import deps
    from nemori_cli.bench import catalog
    from nemori_cli.bench.results import check_resumable
    from nemori_cli.bench.systems import AnsweredBy, Shared
    from nemori_cli.config import load_presets, resolve_embedder

    if not file.is_file():
        raise InputError(f"{file}: no such file")
    llm_preset = deps.llm_preset(settings)
    # Each Nemori system builds its memory as `nemori ingest` would with this model (its partition method).
    chosen = [s.for_model(llm_preset.partition) if hasattr(s, "for_model") else s for s in catalog.resolve(systems_arg)]
    answer_settings = replace(settings, answer_model=answer_model or settings.answer_model)
    answer_preset = deps.answer_preset(answer_settings)
    separate = answer_preset.name != llm_preset.name
    if separate:  # each system answered by the other model is a row of its own, beside the same memory
        chosen = [AnsweredBy(s, answer_preset.name) for s in chosen]
    judge_settings = replace(settings, model=judge_model) if judge_model else None
    judge_preset = deps.llm_preset(judge_settings) if judge_settings else None
    emb_preset = resolve_embedder(load_presets(), settings.embedder)
    config = {
        "benchmark": benchmark,
        "data": {"file": file.name, "sha256": _sha256(file)},
        "model": model_info(llm_preset),
        "judge": model_info(judge_preset) if judge_preset else None,
        "answer_model": model_info(answer_preset) if separate else None,
        "embedder": {
            "name": emb_preset.name,
            "model_name": emb_preset.model_name,
            "dimensions": emb_preset.dimensions,
            "tau": emb_preset.evoke_threshold,
        },
        "scope": scope,
        "scope_key": scope_key,
        # Where the memories are kept: answers do not depend on it, but a folder's builds live in one place.
        "store_engine": stores.engine if stores else "sqlite",
        "store": stores.describe() if stores else None,
        "systems": [s.name for s in chosen],
        "system_descriptions": {n: s.description for n, s in catalog.available().items()},
        "versions": _versions(version),
        "commit": _commit(),
    }
    check_resumable(out, config, IDENTITY)
    llm = deps.build_llm(settings)
    answer_llm = deps.build_answer_llm(answer_settings, llm)
    judge_llm = deps.build_llm(judge_settings) if judge_settings else None
    embedder = deps.build_embedder(settings)
    backend = answer_llm.backend  # contexts are counted and fitted for the model that reads them
    count = getattr(backend, "count_tokens", None) or (lambda text: len(text) // 4 + 1)
    window = getattr(backend, "n_ctx", None) or answer_preset.n_ctx
    shared = Shared(llm, embedder, deps.semantic_settings(settings), count, window, answer_llm)
    config["context_window"] = shared.context_window
    config["token_count"] = "model tokenizer" if getattr(backend, "count_tokens", None) else "characters / 4"
    return shared, judge_llm, chosen, config
