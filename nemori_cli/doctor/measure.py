"""Per-stage and overall figures from a probe's call log, and the rates kept for cost estimates.

"Schema-valid" means valid on the first attempt (outcome ok, attempts 1):
a model that needs the retry costs twice the time even when it gets there.
Seconds are time spent inside LLM calls; tokens per second divide by them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nemori_cli.doctor import sample
from nemori_cli.doctor.probe import INGEST_STAGES, STAGES, ProbeResult
from nemori_cli.domain import CallRecord


def _rate(amount: float, seconds: float) -> float | None:
    return round(amount / seconds, 1) if seconds > 0 else None


def _status(stage: str, probe: ProbeResult, calls: int, ok: int, fallbacks: int) -> str:
    if stage in probe.crashed:
        return "crashed"
    if stage in probe.skipped:
        return "skipped"
    if calls == 0:
        return "no calls"
    if ok == 0:
        return "no valid answer"
    return "fallback" if fallbacks else "ok"


def stage_stats(probe: ProbeResult) -> dict[str, dict]:
    stats = {}
    for stage in STAGES:
        calls = [c for c in probe.calls if c.stage == stage]
        events = [e for e in probe.events if e.stage == stage]
        ok = sum(c.outcome == "ok" for c in calls)
        fallbacks = sum(e.kind == "fallback" for e in events)
        prompt = sum(c.prompt_tokens for c in calls)
        output = sum(c.completion_tokens for c in calls)
        seconds = sum(c.ms for c in calls) / 1000
        stats[stage] = {
            "status": _status(stage, probe, len(calls), ok, fallbacks),
            "error": probe.crashed.get(stage) or probe.skipped.get(stage),
            "calls": len(calls),
            "valid_first_attempt": sum(c.outcome == "ok" and c.attempts == 1 for c in calls),
            "valid": ok,
            "retries": sum(c.attempts - 1 for c in calls),
            "failed": sum(c.outcome == "failed" for c in calls),
            "fallbacks": fallbacks,
            "repairs": sum(e.kind == "repaired" for e in events),
            "prompt_tokens": prompt,
            "output_tokens": output,
            "seconds": round(seconds, 3),
            "tokens_per_s": _rate(prompt + output, seconds),
            "output_tokens_per_s": _rate(output, seconds),
        }
    return stats


def overall(stats: dict[str, dict], probe: ProbeResult) -> dict:
    total = {
        k: sum(s[k] for s in stats.values())
        for k in ("calls", "valid_first_attempt", "retries", "failed", "fallbacks", "repairs", "prompt_tokens", "output_tokens")
    }
    seconds = sum(s["seconds"] for s in stats.values())
    calls = total["calls"]
    n = len(sample.messages())
    return {
        **total,
        "schema_valid_rate": round(total["valid_first_attempt"] / calls, 3) if calls else None,
        "fallback_rate": round(total["fallbacks"] / calls, 3) if calls else None,
        "llm_seconds": round(seconds, 2),
        "tokens_per_s": _rate(total["prompt_tokens"] + total["output_tokens"], seconds),
        "output_tokens_per_s": _rate(total["output_tokens"], seconds),
        "sample_messages": n,
        "sample_chars": sample.content_chars(),
        "ingest_seconds": round(probe.ingest_seconds, 2),
        "answer_seconds": round(probe.answer_seconds, 2),
        # Ingest stages only: answering is not part of ingesting. The
        # self-checks, asked once per run, make this a slight overestimate.
        "seconds_per_100_messages": round(probe.ingest_seconds / n * 100, 1),
    }


@dataclass(frozen=True)
class Throughput:
    prompt_tps: float
    output_tps: float
    fitted: bool  # False: one rate for both kinds, all tokens / all the time


def throughput(calls: list[CallRecord]) -> Throughput | None:
    """Prompt and output tokens per second, separated where the calls allow.

    A local model reads a prompt several times faster than it writes, so one
    tokens-per-second figure misprices a long-prompt, short-answer stage.
    Each call's time is fitted as prompt/P + output/O by least squares; when
    the fit is not physical (a zero or negative rate, too few distinct calls)
    both get the plain rate, all tokens / all the time; either way
    prompt/P + output/O gives back the time measured.
    """
    timed = [c for c in calls if c.ms > 0 and c.prompt_tokens + c.completion_tokens > 0]
    seconds = sum(c.ms for c in timed) / 1000
    if seconds <= 0:
        return None
    prompt = sum(c.prompt_tokens for c in timed)
    output = sum(c.completion_tokens for c in timed)
    if len(timed) >= 3 and prompt and output:
        a = np.array([[c.prompt_tokens, c.completion_tokens] for c in timed], dtype=float)
        t = np.array([c.ms / 1000 for c in timed])
        (per_prompt, per_output), *_ = np.linalg.lstsq(a, t, rcond=None)
        if per_prompt > 0 and per_output > 0:
            return Throughput(round(1 / per_prompt, 1), round(1 / per_output, 1), True)
    plain = round((prompt + output) / seconds, 1)
    return Throughput(plain, plain, False)


def rates_figures(probe: ProbeResult) -> dict | None:
    """The figures `rates.Rates` takes, from the ingest stages only; None when nothing was timed."""
    ingest = [c for c in probe.calls if c.stage in INGEST_STAGES]
    speed = throughput(ingest)
    chars = sample.content_chars()
    if speed is None or not chars:
        return None
    return {
        "prompt_tps": speed.prompt_tps,
        "output_tps": speed.output_tps,
        "prompt_tokens_per_char": sum(c.prompt_tokens for c in ingest) / chars,
        "output_tokens_per_char": sum(c.completion_tokens for c in ingest) / chars,
        # LLM seconds, as rates.py counts them: embedding and SQL are a few percent.
        "seconds_per_char": sum(c.ms for c in ingest) / 1000 / chars,
        "fitted": speed.fitted,
    }
