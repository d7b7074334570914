"""From checks and probe figures to one verdict and what to do about it.

- fit for ingesting: every install check passed, every stage gave at least one
  valid answer, no self-check failed (a failed one switches a stage off for
  the whole ingest, not one call), and under FALLBACK_LIMIT of the calls
  ended in a fallback;
- usable with fallbacks: nothing crashed, but some stage fell back (ingest
  works; those steps are done without the model, see docs/METHOD.md);
- not fit: an install check failed, a stage crashed, the model never gave a
  valid answer, or at least UNUSABLE_LIMIT of the calls fell back (the memory
  would be built mostly without the model);
- installed, not probed: --no-probe, and every install check passed.
"""

from __future__ import annotations

from nemori_cli.doctor.checks import Check

FIT = "fit for ingesting"
USABLE = "usable with fallbacks"
NOT_FIT = "not fit"
NOT_PROBED = "installed; model not probed"

FALLBACK_LIMIT = 0.10
UNUSABLE_LIMIT = 0.50

# What a failed self-check means for an ingest, in the user's terms.
_SELF_CHECK_COST = {
    "integration": "ingest will never merge an episode into the one it continues",
    "consolidation": "ingest will never retire an outdated fact",
}

# What replaces a stage's answer when the model gives none.
_WITHOUT = {"answer": "`nemori ask` shows the best-matching memories instead of an answer"}


def exit_code(verdict: str) -> int:
    return 1 if verdict == NOT_FIT else 0


def decide(
    checks: list[Check], stages: dict[str, dict] | None, overall: dict | None, model: str | None, events: list | None = None
) -> tuple[str, list[str]]:
    failed = [c for c in checks if not c.ok]
    if failed:
        return NOT_FIT, _unique(c.advice or f"fix: {c.detail}" for c in failed)
    if stages is None or overall is None:
        return NOT_PROBED, ["run `nemori doctor` without --no-probe to measure the model on a sample conversation"]
    stronger = _stronger(model)
    crashed = {name: s for name, s in stages.items() if s["status"] in ("crashed", "skipped")}
    if crashed:
        advice = [f"{name} {s['status']}: {s['error']}" for name, s in crashed.items()]
        return NOT_FIT, advice + [f"if it persists, try {stronger}, and report the error with the output of `nemori doctor --json`"]
    rate = overall["fallback_rate"] or 0.0
    if not overall["calls"] or not sum(s["valid"] for s in stages.values()):
        return NOT_FIT, [f"the model gave no valid answer at all; {stronger}"]
    if rate >= UNUSABLE_LIMIT:
        return NOT_FIT, [f"{rate:.0%} of the model's calls fell back, so memory would be built mostly without it; {stronger}"]
    events = events or []
    advice = _fallback_advice(stages, events)
    if rate < FALLBACK_LIMIT and all(s["valid"] for s in stages.values()) and not _failed_self_checks(events):
        return FIT, advice
    return USABLE, advice + [f"for fewer fallbacks, {stronger}"]


def _stronger(model: str | None) -> str:
    endpoint = "point NEMORI_MODEL at an OpenAI-compatible endpoint with a stronger model"
    return endpoint if model == "base" else f"use --model base, or {endpoint}"


def _fallback_advice(stages: dict[str, dict], events: list) -> list[str]:
    advice = []
    for name, s in stages.items():
        if not s["fallbacks"] and s["valid"]:
            continue
        if name in _failed_self_checks(events):
            advice.append(f"{name}: the model fails the self-check, so {_SELF_CHECK_COST[name]}")
        elif not s["valid"]:
            advice.append(f"{name}: no valid answer in {s['calls']} call(s); {_WITHOUT.get(name, 'ingest uses its fallback instead')}")
        else:
            advice.append(f"{name}: {s['fallbacks']} fallback(s) in {s['calls']} call(s)")
    return advice


def _failed_self_checks(events: list) -> set[str]:
    return {e.stage for e in events if e.stage in _SELF_CHECK_COST and e.kind == "fallback" and "self-check" in e.detail}


def _unique(items) -> list[str]:
    return list(dict.fromkeys(items))
