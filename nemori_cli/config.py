"""Settings and model presets: the only module that reads the environment.

Precedence for every setting: command-line option, then environment variable,
then default. Presets come from the package's models.toml (the clone's top-level one), then the user's
own file (NEMORI_MODELS_FILE, or ~/.config/nemori/models.toml), later files
winning on equal names.
"""

from __future__ import annotations

import os
import stat
import tomllib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from nemori_cli.errors import ConfigError
from nemori_cli.presets import DEFAULT_N_CTX, EmbedderPreset, LLMPreset, Presets
from nemori_cli.store.engines import parse_target
from nemori_cli.store.target import StoreTarget

# Defaults that the CLI's options, the Python API (and through it the MCP server) and the pipeline all read.
DEFAULT_WINDOW = 20  # messages the model cuts into episodes at a time (the paper's observation window w)
DEFAULT_NEIGHBOURS = 5  # A-MEM modes: nearest notes offered to the link decision (A-MEM's k)

APP_NAME = "nemori"
# The built-in presets ship inside the package, so an installed tool (pipx, uv tool, a wheel) has them;
# the clone's top-level models.toml is a link to this file.
BUILTIN_MODELS_FILE = Path(__file__).resolve().parent / "models.toml"


def _user_dir(kind: str) -> Path:
    # platformdirs is light; imported here so `nemori --help` stays lean.
    import platformdirs

    getter = {
        "data": platformdirs.user_data_dir,
        "cache": platformdirs.user_cache_dir,
        "config": platformdirs.user_config_dir,
    }[kind]
    return Path(getter(APP_NAME))


MAX_PRESETS_BYTES = 1 << 20  # a presets file is a few KB; a bigger one is not a presets file, and is not read whole


def _read_toml(path: Path) -> dict:
    """A presets file's TOML: a regular file, UTF-8, at most a megabyte; anything else one ConfigError line."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_PRESETS_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror or e})") from None
    if len(data) > MAX_PRESETS_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_PRESETS_BYTES // 1024} KB; not a presets file")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None


# What a path that is not a regular file is, for the refusal: reading /dev/zero as presets never ends.
_NOT_A_FILE = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
)


def _presets_file(path: Path, named_by: str | None) -> bool:
    """Whether ``path`` is a presets file to read: False when absent (and not named), one ConfigError line when it cannot be one."""
    where = f"{named_by}={path}" if named_by else str(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if named_by:
            raise ConfigError(f"{where}: no such file") from None
        return False
    except OSError as e:  # a settings folder this user may not enter: one line, not a traceback
        raise ConfigError(
            f"{path}: cannot be read ({e.strerror}); set NEMORI_MODELS_FILE or XDG_CONFIG_HOME to a folder of yours"
        ) from None
    for test, what in _NOT_A_FILE:
        if test(mode):
            raise ConfigError(f"{where}: is {what}, not a presets file (models.toml)")
    return True


def preset_files() -> list[Path]:
    override = os.environ.get("NEMORI_MODELS_FILE")
    user_file = Path(override) if override else _user_dir("config") / "models.toml"
    files = [BUILTIN_MODELS_FILE]
    if _presets_file(user_file, "NEMORI_MODELS_FILE" if override else None):
        files.append(user_file)
    return files


def load_presets() -> Presets:
    """The presets of every file, each file checked whole (preset_schema.py) before any of it is used."""
    from nemori_cli import preset_schema

    llms: dict[str, LLMPreset] = {}
    embedders: dict[str, EmbedderPreset] = {}
    defaults: dict[str, tuple[str, Path | None]] = {"default_llm": ("small", None), "default_embedder": ("minilm", None)}
    files = preset_files()
    for path in files:
        checked = preset_schema.parse(_read_toml(path), path)
        for key in ("default_llm", "default_embedder", "default_answer_llm"):
            value = getattr(checked, key)
            if value is not None:
                defaults[key] = (value, path)
        llms.update({name: preset_schema.llm_preset(name, llm) for name, llm in checked.llm.items()})
        embedders.update({name: preset_schema.embedder_preset(name, emb) for name, emb in checked.embedder.items()})
    for key, known in (("default_llm", llms), ("default_answer_llm", llms), ("default_embedder", embedders)):
        value, source = defaults.get(key, ("", None))
        gguf = key != "default_embedder" and _is_gguf_path(value)
        if value and value not in known and not gguf:
            kind = "embedder" if key == "default_embedder" else "llm"
            names = ", ".join(sorted(known)) or "none"
            path_too = " or a path to a .gguf file" if kind == "llm" else ""
            raise ConfigError(
                f"{source or files[0]}: {key}: expected the name of an [{kind}.NAME] preset ({names}){path_too}, not {value!r}"
            )
    return Presets(
        llms,
        embedders,
        defaults["default_llm"][0],
        defaults["default_embedder"][0],
        tuple(str(f) for f in files),
        defaults.get("default_answer_llm", ("", None))[0] or None,
    )


def _is_gguf_path(name: str) -> bool:
    """A model named by its file rather than a preset (as --model takes it)."""
    return name.endswith(".gguf") or os.sep in name


def resolve_llm(presets: Presets, name: str | None) -> LLMPreset:
    """A preset by name, or an ad-hoc preset for a path to a .gguf file."""
    name = name or presets.default_llm
    if name in presets.llms:
        return presets.llms[name]
    if _is_gguf_path(name):
        return LLMPreset(name=name, kind="gguf", path=name, n_ctx=DEFAULT_N_CTX)
    known = ", ".join(sorted(presets.llms)) or "none"
    raise ConfigError(f"unknown model {name!r} (--model / NEMORI_MODEL); presets: {known}, or a path to a .gguf file")


def resolve_embedder(presets: Presets, name: str | None) -> EmbedderPreset:
    name = name or presets.default_embedder
    if name in presets.embedders:
        return presets.embedders[name]
    known = ", ".join(sorted(presets.embedders)) or "none"
    raise ConfigError(f"unknown embedder {name!r} (--embedder / NEMORI_EMBEDDER); presets: {known}")


def _check_user(name: str) -> None:
    """A user name is stored and printed: no lone surrogates (undecodable bytes on the command line), no control characters."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"--user / NEMORI_USER {name!r} is not valid text (undecodable bytes?)") from None
    if any(unicodedata.category(c) == "Cc" for c in name):
        raise ConfigError(f"--user / NEMORI_USER {name!r} holds a control character; expected a plain name")


def _threads(value: str | None) -> int | None:
    """NEMORI_THREADS: a positive whole number; unset or empty means the default."""
    return _whole("NEMORI_THREADS", value, "threads, e.g. 4")


def _whole(name: str, value: str | None, what: str, most: int | None = None) -> int | None:
    """A positive whole number from the environment (at most ``most``); unset or empty means the default."""
    if value is None or not value.strip():
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1 or (most is not None and number > most):
        limit = f" from 1 to {most}" if most is not None else ""
        raise ConfigError(f"{name}={value!r}: expected a positive whole number{limit} of {what}")
    return number


MAX_PARALLEL = 16
MAX_WORKERS = 64  # requests in flight to an endpoint (`ingest --workers`)
MAX_GUESS = 16
# Off by default: on 2 cores our loop writes the same text at about the same speed, and guesses
# barely pay while rounding the logits differently (docs/PERFORMANCE.md section 9).
DEFAULT_GUESS: int | None = None


INSTALL_CHOICES = ("terminal", "yes", "no")


def install_command(role: str, name: str) -> str:
    """The one command that installs a built-in preset's packages into nemori's own environment (model_install.py)."""
    return f"nemori models install {name}" if role == "model" else f"nemori models install --embedder {name}"


def _install_models(value: str | None) -> str:
    """NEMORI_INSTALL_MODELS: when a missing built-in model is installed by the command that needs it."""
    if value is None or not value.strip():
        return "terminal"
    choice = value.strip().lower()
    if choice not in INSTALL_CHOICES:
        raise ConfigError(f"NEMORI_INSTALL_MODELS={value!r}: expected one of {', '.join(INSTALL_CHOICES)}")
    return choice


def _lookup(value: str | None) -> int | None:
    """NEMORI_LOOKUP: "off" (llama-cpp-python's own loop) or how many guessed tokens to check per step (0 to 16)."""
    if value is None or not value.strip():
        return DEFAULT_GUESS
    if value.strip().lower() == "off":
        return None
    try:
        number = int(value)
    except ValueError:
        number = -1
    if not 0 <= number <= MAX_GUESS:
        raise ConfigError(f"NEMORI_LOOKUP={value!r}: expected off, or a whole number from 0 to {MAX_GUESS} of guessed tokens per step")
    return number


@dataclass
class Settings:
    """Everything a command needs to know, resolved once."""

    # --db / NEMORI_DB: a SQLite file or a postgresql:// URL (store/target.py); what opens it, locks it and names it.
    store: StoreTarget
    user: str
    model: str | None  # preset name or GGUF path; None = the presets' default
    embedder: str | None
    threads: int | None = None  # llama.cpp threads (env NEMORI_THREADS); default: the cores we may use
    answer_model: str | None = None  # --answer-model / NEMORI_ANSWER_MODEL; None: models.toml's default_answer_llm, else model
    cache_dir: Path = field(default_factory=lambda: _user_dir("cache"))
    prefix_cache: bool = True  # llama.cpp prompt-state snapshots; NEMORI_PREFIX_CACHE=0 turns them off (for measuring them)
    # Independent generations (a window's narrations) decoded together in-process (llm/batched.py),
    # or sent at once to an endpoint; env NEMORI_PARALLEL or `ingest --parallel`.
    parallel: int = 1
    # Greedy calls decoded by nemori's own loop, checking up to this many tokens guessed from the prompt
    # per step (llm/lookup_decoding.py); None: llama-cpp-python's loop. Env NEMORI_LOOKUP (off or 0-16).
    lookup: int | None = DEFAULT_GUESS
    # Requests in flight to an OpenAI-compatible endpoint during an ingest (pipeline/ahead.py);
    # env NEMORI_WORKERS or `ingest --workers`. A local GGUF model takes 1.
    workers: int = 1
    # A built-in model whose packages are missing: "terminal" installs them when a person is at one
    # (stdin and stderr are terminals), else the error names the command; "yes" / "no" always / never.
    # Env NEMORI_INSTALL_MODELS. A script never downloads hundreds of MB it did not ask for.
    install_models: str = "terminal"

    @property
    def store_name(self) -> str:
        """What messages call the store: the file's path, or the server's URL without its password."""
        return self.store.name

    @classmethod
    def from_env(
        cls,
        *,
        db: str | None = None,
        user: str | None = None,
        model: str | None = None,
        embedder: str | None = None,
        answer_model: str | None = None,
    ) -> Settings:
        env = os.environ
        target = db or env.get("NEMORI_DB") or str(_user_dir("data") / "nemori.db")
        # Only a user given nowhere is "default": an empty --user or NEMORI_USER is a mistake, not a choice.
        user_name = user if user is not None else env.get("NEMORI_USER", "default")
        if not user_name.strip():
            raise ConfigError("--user / NEMORI_USER must not be empty")
        _check_user(user_name)
        threads = _threads(env.get("NEMORI_THREADS"))
        cache = env.get("NEMORI_CACHE_DIR")
        return cls(
            store=parse_target(target),
            user=user_name,
            model=model or env.get("NEMORI_MODEL") or None,
            embedder=embedder or env.get("NEMORI_EMBEDDER") or None,
            answer_model=answer_model or env.get("NEMORI_ANSWER_MODEL") or None,
            threads=threads,
            cache_dir=Path(cache).expanduser() if cache else _user_dir("cache"),
            prefix_cache=env.get("NEMORI_PREFIX_CACHE", "1") != "0",
            lookup=_lookup(env.get("NEMORI_LOOKUP")),
            parallel=_whole("NEMORI_PARALLEL", env.get("NEMORI_PARALLEL"), "generations at once, e.g. 4", MAX_PARALLEL) or 1,
            workers=_whole("NEMORI_WORKERS", env.get("NEMORI_WORKERS"), "requests in flight to an endpoint, e.g. 4", MAX_WORKERS) or 1,
            install_models=_install_models(env.get("NEMORI_INSTALL_MODELS")),
        )


def child_environment(overrides: dict[str, str]) -> dict[str, str]:
    """This process's environment with ``overrides``: what a nemori process started by this one (`build --background`) runs with."""
    return {**os.environ, **overrides}


def api_key_from_env(var: str | None) -> str | None:
    return os.environ.get(var) if var else None


def api_key_is_set(var: str) -> bool:
    """Whether the variable a preset names for its key is set at all (even to an empty value)."""
    return var in os.environ


def env_defaults_to_set(defaults: dict[str, str]) -> dict[str, str]:
    """Those of ``defaults`` the environment does not set yet: what a module may set for a library without overriding the user."""
    return {name: value for name, value in defaults.items() if name not in os.environ}
