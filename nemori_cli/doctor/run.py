"""The doctor's order: install checks, then (if they pass) the probe, then the verdict.

Model builders are parameters so that tests can hand in fakes; by default
they are looked up in deps at call time, the same builders every command uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nemori_cli.config import Settings
from nemori_cli.doctor import checks as check
from nemori_cli.doctor import measure, verdict
from nemori_cli.doctor.checks import Check
from nemori_cli.errors import NemoriError


@dataclass
class Report:
    model: str | None
    checks: list[Check]
    stages: dict[str, dict] = field(default_factory=dict)
    overall: dict = field(default_factory=dict)
    verdict: str = ""
    advice: list[str] = field(default_factory=list)
    sample_answer: str | None = None
    rates: str | None = None  # what became of the measured rates
    # Kept for the verdict and the rates, not printed.
    events: list = field(default_factory=list, repr=False)
    figures: dict | None = field(default=None, repr=False)

    @property
    def exit_code(self) -> int:
        return verdict.exit_code(self.verdict)

    def to_json(self) -> dict:
        return {
            "model": self.model,
            "checks": [c.to_json() for c in self.checks],
            "stages": self.stages,
            "overall": self.overall,
            "verdict": self.verdict,
            "advice": self.advice,
            "sample_answer": self.sample_answer,
            "rates": self.rates,
        }


def run(
    settings: Settings,
    *,
    probe: bool = True,
    build_llm: Callable | None = None,
    build_embedder: Callable | None = None,
) -> Report:
    from nemori_cli import deps

    checks = [check.python_version(), check.sqlite_vec(), check.fts5()]
    preset_check, preset = check.llm_preset(settings)
    checks.append(preset_check)
    if preset is not None:
        checks.extend(check.model_access(preset, settings))
    embedder_check, embedder = check.embedder(settings, build_embedder or deps.build_embedder)
    checks.append(embedder_check)
    report = Report(model=preset.name if preset else settings.model, checks=checks)

    if probe and all(c.ok for c in checks):
        loaded, llm = _load(settings, build_llm or deps.build_llm)
        checks.append(loaded)
        if llm is not None:
            _probe(report, llm, embedder)
    stages = report.stages if report.stages else None
    overall = report.overall if report.overall else None
    report.verdict, report.advice = verdict.decide(checks, stages, overall, report.model, report.events)
    if report.verdict != verdict.NOT_FIT and report.figures and preset is not None:
        report.rates = save_rates(preset, report.figures, settings)
    return report


def _load(settings: Settings, build: Callable) -> tuple[Check, object | None]:
    """Loading the model is the first thing the probe pays for; a failure is a check line."""
    started = time.perf_counter()
    try:
        llm = build(settings)
    except NemoriError as e:
        return Check("model loads", False, e.message, check.INSTALL_ADVICE), None
    except Exception as e:  # a broken llama.cpp build fails here in many ways
        return Check("model loads", False, f"{type(e).__name__}: {e}", check.INSTALL_ADVICE), None
    return Check("model loads", True, f"{llm.model_id} ready in {time.perf_counter() - started:.1f} s"), llm


def _probe(report: Report, llm, embedder) -> None:
    from nemori_cli.doctor import probe

    result = probe.run(llm, embedder)
    report.stages = measure.stage_stats(result)
    report.overall = measure.overall(report.stages, result)
    report.sample_answer = result.answer
    report.events = result.events  # for the advice: which fallbacks were failed self-checks
    report.figures = measure.rates_figures(result)


def save_rates(preset, figures: dict, settings: Settings) -> str:
    """Hand the measured rates to nemori_cli.rates, when this nemori has it."""
    try:
        from nemori_cli import rates
    except ImportError:
        return "not saved: this nemori has no rates module"
    # The id cost estimates look rates up by (the id the backend logs calls under).
    model_id = rates.model_id(preset) if hasattr(rates, "model_id") else preset.name
    try:
        measured = rates.Rates(
            prompt_tps=figures["prompt_tps"],
            output_tps=figures["output_tps"],
            prompt_tokens_per_char=figures["prompt_tokens_per_char"],
            output_tokens_per_char=figures["output_tokens_per_char"],
            seconds_per_char=figures["seconds_per_char"],
            source="nemori doctor",  # the name `ingest --dry-run` shows its figures' origin by
        )
        rates.save(model_id, measured, settings.cache_dir)
    except (OSError, TypeError, ValueError, NemoriError) as e:  # a cache we cannot write must not fail the doctor
        return f"not saved: {e}"
    # save() writes rates.json in the cache directory it is given and returns nothing.
    where = settings.cache_dir / getattr(rates, "RATES_FILE", "rates.json")
    return f"saved for {model_id} in {where}"
