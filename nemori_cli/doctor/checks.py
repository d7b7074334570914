"""Install checks: can this Python, this SQLite and these models run nemori at all?

Each check answers with a Check (ok or not, a short detail, and what to do
when not) instead of raising: the doctor's job is to list every problem in
one run, so a failure here never stops the checks after it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nemori_cli.config import Settings, install_command
from nemori_cli.errors import ModelNotInstalled, NemoriError
from nemori_cli.presets import LLMPreset
from nemori_cli.store import capabilities

if TYPE_CHECKING:  # for annotations only: the checks must run even where numpy is broken
    from nemori_cli.embed.base import Embedder

REACH_TIMEOUT_S = 5.0  # an endpoint that takes longer to list its models is as good as down
INSTALL_ADVICE = "run `make install` (or `pip install -e .` in the project's virtual environment)"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    advice: str | None = None  # what to do when not ok

    def to_json(self) -> dict:
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "advice": self.advice}


def python_version() -> Check:
    v = sys.version_info
    text = f"{v.major}.{v.minor}.{v.micro}"
    if v < (3, 11):
        return Check("python", False, f"{text}; nemori needs 3.11+", "use Python 3.11 or newer")
    return Check("python", True, text)


def sqlite_vec() -> Check:
    """The store's own way in (store/sqlite_connection.py): apsw, then the sqlite-vec extension, in memory."""
    try:
        apsw_version, sqlite_version, vec_version = capabilities.sqlite_vec_versions()
    except Exception as e:  # any failure here means the store cannot open; say which
        return Check("sqlite-vec", False, f"{type(e).__name__}: {e}", INSTALL_ADVICE)
    return Check("sqlite-vec", True, f"apsw {apsw_version}, SQLite {sqlite_version}, sqlite-vec {vec_version}")


def fts5() -> Check:
    try:
        found = capabilities.fts5_finds()
    except Exception as e:
        return Check("fts5", False, f"{type(e).__name__}: {e}", INSTALL_ADVICE)
    if found != 1:
        return Check("fts5", False, "full-text query found nothing", INSTALL_ADVICE)
    return Check("fts5", True, "full-text index works")


def llm_preset(settings: Settings) -> tuple[Check, LLMPreset | None]:
    """The preset other commands would use, resolved the same way (deps.llm_preset)."""
    from nemori_cli import deps

    try:
        preset = deps.llm_preset(settings)
    except NemoriError as e:
        return Check("model preset", False, e.message, "choose one of `nemori models` with --model, or fix your models.toml"), None
    where = preset.base_url if preset.kind == "openai" else (preset.path or f"{len(preset.parts)} packaged part(s)")
    return Check("model preset", True, f"{preset.name} ({preset.kind}: {where})"), preset


def model_access(preset: LLMPreset, settings: Settings) -> list[Check]:
    if preset.kind == "openai":
        return [endpoint(preset)]
    return [llama_cpp(), gguf_file(preset, settings.cache_dir)]


def llama_cpp() -> Check:
    try:
        import llama_cpp as lc
    except Exception as e:  # a broken build fails at import with OSError as often as ImportError
        return Check("llama.cpp", False, f"llama-cpp-python does not import ({type(e).__name__}: {e})", INSTALL_ADVICE)
    return Check("llama.cpp", True, f"llama-cpp-python {getattr(lc, '__version__', '?')}")


def gguf_file(preset: LLMPreset, cache_dir: Path) -> Check:
    """Present and verified; modelfiles does both, and remembers a verified file.

    A file verified before (a marker in the cache, or an assembled file, which
    is named by its sha256 and only ever written after the hash matched) is
    reported as such rather than hashed again: hashing 1 GB costs seconds.
    """
    from nemori_cli import modelfiles

    was_verified = _already_verified(preset, cache_dir)
    started = time.perf_counter()
    try:
        path = modelfiles.gguf_path(preset, cache_dir)
    except NemoriError as e:
        return Check(
            "model file",
            False,
            e.message,
            f"run `{install_command('model', preset.name)}`" if preset.packages else "fix the preset's path in your models.toml",
        )
    seconds = time.perf_counter() - started
    size = f"{path.stat().st_size / 1e6:.0f} MB"
    if not preset.sha256:
        return Check("model file", True, f"{path} ({size}); the preset gives no sha256, so it is not verified")
    how = "verified before (cached)" if was_verified else f"verified now in {seconds:.1f} s"
    return Check("model file", True, f"{path} ({size}), sha256 {preset.sha256[:12]}… {how}")


def _already_verified(preset: LLMPreset, cache_dir: Path) -> bool:
    from nemori_cli import modelfiles

    if preset.parts and len(preset.parts) > 1 and preset.sha256:
        return (cache_dir / "models" / f"{preset.name}-{preset.sha256[:12]}.gguf").is_file()
    path: Path | None
    if preset.path:
        path = Path(preset.path).expanduser()
    elif preset.parts:
        path = modelfiles.find_in_site_packages(preset.parts[0])
    else:
        path = None
    if path is None or not path.is_file() or not preset.sha256:
        return False
    # modelfiles keys its marker by path, size, mtime and sha256; ask it rather than copy the scheme.
    return modelfiles.verified_marker(cache_dir, path, preset.sha256).exists()


def endpoint(preset: LLMPreset) -> Check:
    """GET {base}/models with a short timeout; a dead endpoint is a line, not a traceback."""
    from nemori_cli.config import api_key_from_env, api_key_is_set
    from nemori_cli.llm.openai_compat import OpenAICompatBackend

    url = (preset.base_url or "").rstrip("/")
    local = "127.0.0.1" in url or "localhost" in url
    if preset.api_key_env and not api_key_is_set(preset.api_key_env) and not local:
        return Check(
            "endpoint",
            False,
            f"{url}: ${preset.api_key_env} is not set",
            f"export {preset.api_key_env}=... (the key is never written to disk)",
        )
    probe = OpenAICompatBackend(
        name=preset.name, base_url=url, model=preset.model or "", api_key=api_key_from_env(preset.api_key_env), timeout=REACH_TIMEOUT_S
    )
    started = time.perf_counter()
    try:
        probe.check_reachable()
    except NemoriError as e:
        return Check(
            "endpoint",
            False,
            f"{url}/models: {e.message}",
            f"start the server at {url}, or point NEMORI_MODEL at another OpenAI-compatible endpoint or a local preset",
        )
    return Check("endpoint", True, f"{url} answered in {(time.perf_counter() - started) * 1000:.0f} ms (model {preset.model})")


def embedder(settings: Settings, build: Callable[[Settings], Embedder]) -> tuple[Check, Embedder | None]:
    """Load the embedder and embed one sentence both ways; the loaded one is reused by the probe."""
    sentence = "The doctor checks that one sentence can be embedded."
    try:
        model = build(settings)
        started = time.perf_counter()
        vector = model.embed_query(sentence)  # what `ask` pays (without sentence-transformers where the folder allows)
        ms = (time.perf_counter() - started) * 1000
        model.embed_documents([sentence])  # what ingest uses: sentence-transformers and torch, loaded on first use
    except ModelNotInstalled as e:
        return Check("embedder", False, e.message, f"run `{install_command('embedder', e.preset)}`"), None
    except NemoriError as e:
        return Check("embedder", False, e.message, INSTALL_ADVICE), None
    except Exception as e:  # torch or sentence-transformers broken: report, do not crash
        return Check("embedder", False, f"{type(e).__name__}: {e}", INSTALL_ADVICE), None
    dims = len(vector)
    return Check("embedder", True, f"{model.model_name}: {dims} dimensions, one sentence in {ms:.0f} ms"), model
