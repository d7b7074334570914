"""How fast a model works and how many tokens an ingest spends: the figures cost estimates scale.

Three sources, best first (see ``best``): the call log of earlier ingests in
the same database (the machine, model and method that will do the work),
rates that `nemori doctor` measured and saved in the cache directory, and
rough built-in figures per preset. Costs are counted per character of
message content because that is what a dry run can see before any model runs.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nemori_cli import measured, stages

if TYPE_CHECKING:
    from nemori_cli.presets import LLMPreset
    from nemori_cli.store.contract import Store

RATES_FILE = "rates.json"

# Stages an ingest runs; `answer` (ask) and benchmark judges are left out so
# that questions asked of a memory do not count as the cost of building it.
INGEST_STAGES = stages.INGEST


@dataclass(frozen=True)
class Rates:
    prompt_tps: float  # prompt tokens processed per second
    output_tps: float  # output tokens generated per second
    prompt_tokens_per_char: float  # LLM prompt tokens spent per character of message content ingested
    output_tokens_per_char: float
    seconds_per_char: float  # LLM wall seconds per character of message content ingested
    source: str  # where the figures come from: "this database", "nemori doctor", "built-in", "generic default"


def _scaled(base: Rates, speedup: float, source: str = "built-in") -> Rates:
    """The same prompts and token counts on a model ``speedup`` times as fast."""
    return Rates(
        prompt_tps=base.prompt_tps * speedup,
        output_tps=base.output_tps * speedup,
        prompt_tokens_per_char=base.prompt_tokens_per_char,
        output_tokens_per_char=base.output_tokens_per_char,
        seconds_per_char=base.seconds_per_char / speedup,
        source=source,
    )


# Rough figures, good to a factor of two at best: one reference ingest on one
# 2-core machine (measured.py holds its counts; docs/PERFORMANCE.md its speeds
# and the command). `tiny` and `base` are scaled from it by their observed
# speed with the same tokens per character: the prompts are the same and the
# tokenizers close. `nemori doctor` (measured on this machine) or an earlier
# ingest into the same database replaces them.
_SMALL = Rates(
    prompt_tps=80.0,
    output_tps=25.0,
    prompt_tokens_per_char=measured.PROMPT_TOKENS / measured.CHARACTERS,
    output_tokens_per_char=measured.OUTPUT_TOKENS / measured.CHARACTERS,
    seconds_per_char=measured.LLM_SECONDS / measured.CHARACTERS,
    source="built-in",
)
BUILTIN: dict[str, Rates] = {
    "small": _SMALL,
    "tiny": _scaled(_SMALL, 4.0),
    "base": _scaled(_SMALL, 1 / 3),
}

# For a model nothing is known about (a GGUF of the user's, an endpoint):
# assume the slowest preset rather than promise too little.
GENERIC = Rates(**{**asdict(BUILTIN["base"]), "source": "generic default"})

# How much slower a token is generated than read, from the built-in figures;
# used to split a database's call time (one number per call) into two speeds.
_OUTPUT_SLOWDOWN = _SMALL.prompt_tps / _SMALL.output_tps


def model_id(preset: LLMPreset) -> str:
    """The id a preset's backend logs its calls under, without loading it.

    Mirrors the backends (llm/llamacpp.py: the preset name; llm/openai_compat.py:
    "name (model)") so that rates found by model id match the calls table.
    """
    if preset.kind == "openai":
        return f"{preset.name} ({preset.model})"
    return preset.name


# -- saved rates (nemori doctor) ----------------------------------------------
def _default_cache_dir() -> Path:
    from nemori_cli.config import Settings

    return Settings.from_env().cache_dir


def _read_all(path: Path) -> dict[str, Any]:
    """The saved rates by model id; an unreadable file counts as none saved (it is only a cache)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    models = data.get("models") if isinstance(data, dict) else None
    return models if isinstance(models, dict) else {}


def save(model_id: str, rates: Rates, cache_dir: Path | None = None) -> None:
    """Record a model's rates in the cache directory's rates.json, replacing its earlier ones.

    Written to a temporary file and renamed over the old one, so a reader (or a
    crash) never sees half a file. Two concurrent saves can lose one of them;
    a lost measurement is only a worse estimate.
    """
    directory = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / RATES_FILE
    models = _read_all(path)
    models[model_id] = asdict(rates)
    fd, tmp = tempfile.mkstemp(prefix=".rates-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"models": models}, f, indent=2, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(model_id: str, cache_dir: Path | None = None) -> Rates | None:
    directory = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    raw = _read_all(directory / RATES_FILE).get(model_id)
    if not isinstance(raw, dict):
        return None
    try:
        return Rates(**{f.name: raw[f.name] for f in fields(Rates)})
    except (KeyError, TypeError):
        return None  # written by another version: ignore rather than fail an ingest


# -- rates from a database's own history ----------------------------------------
def from_database(db: Store, user: str, model_id: str) -> Rates | None:
    """Rates from the calls this model made while ingesting this user's messages; None without history.

    Calls are logged per stage, not per message, so they are set against all
    the characters that have an episode; when several models built this memory,
    each is credited with the share of the characters matching its share of
    the calls.
    """
    from nemori_cli.store import messages, telemetry

    mine = telemetry.ingest_usage(db, user, INGEST_STAGES, model_id)
    if not mine["calls"]:
        return None
    everyone = telemetry.ingest_usage(db, user, INGEST_STAGES)
    characters = messages.characters_in_episodes(db, user) * mine["calls"] / everyone["calls"]
    prompt, output = mine["prompt_tokens"], mine["completion_tokens"]
    if characters <= 0 or prompt + output <= 0:
        return None
    # A fake or cached model can log 0 ms; a floor keeps the speeds finite.
    seconds = max(float(mine["ms"]) / 1000, 1e-3)
    # One time per call covers reading and writing; split it assuming output
    # tokens cost _OUTPUT_SLOWDOWN times a prompt token, as measured above.
    prompt_tps = (prompt + _OUTPUT_SLOWDOWN * output) / seconds
    return Rates(
        prompt_tps=prompt_tps,
        output_tps=prompt_tps / _OUTPUT_SLOWDOWN,
        prompt_tokens_per_char=prompt / characters,
        output_tokens_per_char=output / characters,
        seconds_per_char=seconds / characters,
        source="this database",
    )


def best(db: Store | None, user: str, model_id: str, preset_name: str | None = None, cache_dir: Path | None = None) -> Rates:
    """This database's history, else `nemori doctor`'s speeds on built-in token counts, else built-in, else generic."""
    if db is not None:
        found = from_database(db, user, model_id)
        if found is not None:
            return found
    reference = BUILTIN.get(model_id) or BUILTIN.get(preset_name or "") or GENERIC
    saved = load(model_id, cache_dir)
    if saved is not None:
        return with_speeds_of(saved, reference)
    return reference


def with_speeds_of(measured_rates: Rates, reference: Rates) -> Rates:
    """The doctor's speeds applied to the token counts of a real ingest.

    The doctor's sample is 12 short messages, so each call's fixed
    instructions weigh far more per character than in a real conversation,
    and an estimate built on its tokens per character came out far too long
    (docs/PERFORMANCE.md, section 5, has the figures). What
    the probe measures well is how fast this model reads and writes on this
    machine; the reference run's time is scaled by that.
    """
    p, o = reference.prompt_tokens_per_char, reference.output_tokens_per_char
    at_reference = p / reference.prompt_tps + o / reference.output_tps
    at_measured = p / measured_rates.prompt_tps + o / measured_rates.output_tps
    return Rates(
        prompt_tps=measured_rates.prompt_tps,
        output_tps=measured_rates.output_tps,
        prompt_tokens_per_char=p,
        output_tokens_per_char=o,
        seconds_per_char=reference.seconds_per_char * at_measured / at_reference,
        source=measured_rates.source,
    )
