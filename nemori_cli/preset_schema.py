"""What a presets file (models.toml) may hold, checked by pydantic when it is read.

A presets file is the user's own, but it decides which files nemori reads,
concatenates into its cache and loads as a model, and what pip installs
into nemori's environment; a mistake in it (or a file someone else wrote)
must be one line naming the file, the key and what was expected, before
anything is used. So:

- every key has a type and a range, unknown keys are refused (a typo would
  otherwise be a setting silently not applied), and nothing is coerced
  (``n_ctx = "big"`` is not a number, ``true`` is not 1);
- a preset's name goes into a cache file's name: letters, digits, ``._-``;
- ``parts`` are files inside the package directory they name
  (``package/dir/file``): no absolute path, no ``..``, so a preset cannot
  have nemori read and concatenate files elsewhere;
- ``packages`` are requirement strings (PEP 508: ``name``, ``name==1.0``,
  ``name @ URL``), checked by ``packaging``: never pip options such as
  ``--index-url``.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from nemori_cli.errors import ConfigError
from nemori_cli.presets import DEFAULT_N_CTX, EmbedderPreset, LLMPreset

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_PACKAGE_DIR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # an importable top-level name: the folder a package installs
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _part(value: str) -> str:
    parts = PurePosixPath(value).parts
    if (
        "\\" in value
        or value.startswith("/")
        or len(parts) < 2
        or any(p in ("", ".", "..") for p in value.split("/"))
        or not _PACKAGE_DIR.match(parts[0])
    ):
        raise ValueError("expected a file inside the package that carries it (package_dir/…/file, no '..', not absolute)")
    return value


def _requirement(value: str) -> str:
    try:
        Requirement(value)
    except InvalidRequirement:
        raise ValueError("expected a requirement string (name, name==1.0, name @ URL; pip options and paths are refused)") from None
    return value


def _env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise ValueError("expected the NAME of an environment variable (letters, digits, _)")
    return value


def _url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError("expected an http:// or https:// URL")
    return value


Text = Annotated[str, Field(min_length=1, max_length=4096)]
Part = Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(_part)]
Package = Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(_requirement)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-fA-F]{64}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Files(_Strict):
    description: str = Field(default="", max_length=4096)
    path: Text | None = None
    parts: list[Part] = Field(default_factory=list, max_length=1000)  # TOML arrays; tuples in the presets
    packages: list[Package] = Field(default_factory=list, max_length=1000)
    download_mb: Annotated[int, Field(ge=0, le=10_000_000)] | None = None


class LLMBody(_Files):
    kind: Literal["gguf", "openai"]
    sha256: Sha256 | None = None
    n_ctx: Annotated[int, Field(gt=0, le=1 << 24)] = DEFAULT_N_CTX
    base_url: Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_url)] | None = None
    model: Text | None = None
    api_key_env: Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_env_name)] | None = None
    timeout: Annotated[float, Field(gt=0, le=86_400)] = 120.0
    connect_timeout: Annotated[float, Field(gt=0, le=86_400)] = 5.0
    partition: Literal["model", "similarity"] = "model"
    flash_attn: bool = False

    @model_validator(mode="before")
    @classmethod
    def _no_key(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and "api_key" in raw:
            raise ValueError("has 'api_key': keys never go in files; name the environment variable that holds it with api_key_env")
        return raw

    @model_validator(mode="after")
    def _complete(self) -> LLMBody:
        if self.kind == "gguf" and not (self.path or self.parts):
            raise ValueError("expected 'path' (a GGUF file) or 'parts' for kind 'gguf'")
        if self.kind == "gguf" and len(self.parts) > 1 and not self.sha256:
            raise ValueError("expected a 'sha256' for a model made of several parts")
        if self.kind == "openai" and not (self.base_url and self.model):
            raise ValueError("expected 'base_url' and 'model' for kind 'openai'")
        return self


class EmbedderBody(_Files):
    kind: Literal["sentence-transformers"]
    name: Text | None = None
    dimensions: Annotated[int, Field(gt=0, le=1 << 16)] | None = None
    evoke_threshold: Annotated[float, Field(gt=0, le=1)] = 0.70

    @model_validator(mode="after")
    def _complete(self) -> EmbedderBody:
        if not (self.path or self.parts or self.name):
            raise ValueError("expected 'path', 'parts' or 'name'")
        return self


PresetName = Annotated[str, Field(pattern=_NAME.pattern)]


class PresetsFile(_Strict):
    default_llm: Text | None = None
    default_embedder: Text | None = None
    default_answer_llm: str | None = None  # "" means: the model that builds the memory answers too
    llm: dict[PresetName, LLMBody] = Field(default_factory=dict)
    embedder: dict[PresetName, EmbedderBody] = Field(default_factory=dict)


_EXPECTED = {
    "int_type": "expected a whole number",
    "float_type": "expected a number",
    "string_type": "expected a string",
    "bool_type": "expected true or false",
    "dict_type": "expected a table",
    "model_type": "expected a table",
    "tuple_type": "expected a list",
    "list_type": "expected a list",
    "missing": "missing, and required",
    "string_too_short": "expected a non-empty string",
}


def _where(loc: tuple[int | str, ...]) -> str:
    """('llm', 'small', 'n_ctx') as "[llm.small] n_ctx"; a list's item as "parts[2]"."""
    if len(loc) >= 2 and loc[0] in ("llm", "embedder"):
        section = f"[{loc[0]}.{loc[1]}]"
        rest = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[2:]).lstrip(".")
        return f"{section} {rest}".strip()
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".") or "the file"


def _expected(error: Any) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "extra_forbidden":
        return "not a key nemori knows (a typo?)"
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected', '')}"
    if kind == "string_pattern_mismatch":  # the two patterns: a sha256, and a preset's name (a table's key)
        return (
            "expected 64 hexadecimal digits"
            if error["loc"][-1] == "sha256"
            else "expected a preset name of letters, digits, '.', '_' or '-'"
        )
    for bound, words in (("gt", "above"), ("ge", "at least"), ("lt", "below"), ("le", "at most")):
        if bound in ctx and kind.startswith(("greater", "less")):
            limit = ctx[bound]
            return f"expected a number {words} {int(limit) if float(limit).is_integer() else limit}"
    if kind in ("too_long", "string_too_long"):
        return "too long"
    if kind == "value_error":
        return str(error["msg"]).removeprefix("Value error, ")
    return _EXPECTED.get(kind, str(error["msg"]).lower())


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def one_line(error: ValidationError, source: Path) -> str:
    """The first problem of a presets file, as "FILE: [llm.NAME] KEY: expected ..., not VALUE"."""
    first = error.errors()[0]
    loc = tuple(first["loc"])
    # A table's key that fails its pattern is reported at ("llm", NAME, "[key]"): the name is what is wrong.
    where = f"[{loc[0]}] preset name" if "[key]" in loc else _where(loc)
    said = f"{source}: {where}: {_expected(first)}"
    if first["type"] not in ("missing", "extra_forbidden") and not (first["type"] == "value_error" and len(loc) <= 2):
        said += f", not {_shown(first.get('input'))}"
    return said.replace("\n", " ")


def parse(raw: dict, source: Path) -> PresetsFile:
    """A presets file's TOML, checked; one ConfigError line for its first problem."""
    try:
        return PresetsFile.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(one_line(e, source)) from None


def _fields(body: _Files) -> dict[str, Any]:
    fields = body.model_dump(exclude_none=True)
    return {**fields, "parts": tuple(body.parts), "packages": tuple(body.packages)}


def llm_preset(name: str, body: LLMBody) -> LLMPreset:
    return LLMPreset(name=name, **_fields(body))


def embedder_preset(name: str, body: EmbedderBody) -> EmbedderPreset:
    fields = _fields(body)
    model_name = fields.pop("name", name)
    return EmbedderPreset(name=name, model_name=model_name, **fields)
