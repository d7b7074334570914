"""A build in the terminal, for `ingest` and `build` alike: run under a progress bar, the core context prepared after it, the report."""

from __future__ import annotations

import sys

import typer

from nemori_cli.cli.render import console, print_json


def run_with_progress(run, memory, *, show_progress: bool):
    """``run(progress)`` (an ingest or a flush) under a progress bar; Ctrl-C says what is pending and exits 130."""
    from nemori_cli.cli.progress import progress_bar

    try:
        with progress_bar(show_progress, "episodes") as update:
            return run(update)
    except KeyboardInterrupt:
        sys.stderr.write(
            f"nemori: interrupted; {memory.pending()} messages are pending and nothing is lost: "
            "run `nemori build` or the same ingest again to resume\n"
        )
        raise typer.Exit(130) from None


def prepare_core(memory, report) -> dict | None:
    """The core context's KV state, computed now for the next `ask` (retrieval/core_cache.py), when the answer model is the one loaded.

    Another answer model is not loaded for it: the first `ask` computes the
    state then. A failure here costs the next `ask` time, not this ingest.
    """
    from nemori_cli import deps
    from nemori_cli.errors import NemoriError

    settings = memory.settings
    if report.pending or deps.answer_preset(settings).name != deps.llm_preset(settings).name:
        return None
    try:
        prepared, core = memory.prepare_core()
    except NemoriError as e:
        sys.stderr.write(f"nemori: warning: the core context was not prepared ({e.message}); the next `ask` prepares it\n")
        return None
    if prepared.outcome == "none":
        return None
    return {
        "tokens": prepared.tokens,
        "seconds": round(prepared.ms / 1000, 2),
        "saved_bytes": prepared.saved_bytes,
        "outcome": prepared.outcome,
        "read": prepared.read,
        "whole_history": core.complete,
    }


# A run in which most LLM calls gave no usable answer still built its memory,
# from the stages' deterministic fallbacks, so it exits 0; but it says so, once,
# on stderr. (A run in which every call failed stores nothing and exits 3: the
# runner's stop_when_every_call_fails.)
WARN_MIN_CALLS = 3
WARN_SHARE = 0.5


def fallback_warning(report) -> str | None:
    """The warning line for a run whose LLM calls mostly failed or fell back (more than WARN_SHARE of at least WARN_MIN_CALLS), else None."""
    bad = max(report.llm_failed, report.fallbacks)
    if report.llm_calls < WARN_MIN_CALLS or bad <= WARN_SHARE * report.llm_calls:
        return None
    return (
        f"nemori: warning: {report.llm_failed} of {report.llm_calls} LLM calls in this run ({report.llm_failed / report.llm_calls:.0%}) "
        f"gave no usable answer and {report.fallbacks} steps fell back to deterministic rules, so much of this memory was built without the model: "
        "see `nemori stats`, and check the model with `nemori doctor`"
    )


def print_report(
    report,
    source: str | None,
    json_out: bool,
    max_tokens: int | None = None,
    read_as: dict | None = None,
    core: dict | None = None,
    built: dict | None = None,
) -> None:
    if report.stopped_by_budget:  # on stderr in both modes: stdout stays the report
        sys.stderr.write(
            f"nemori: token budget of {max_tokens} reached after {report.tokens_used} tokens; {report.pending} messages pending; "
            "rerun the same command (or `nemori build`) to continue\n"
        )
    warning = fallback_warning(report)
    if warning:
        sys.stderr.write(warning + "\n")
    if json_out:
        print_json(
            {
                "source": source,
                **(read_as or {}),
                **vars(report),
                "seconds": round(report.seconds, 2),
                "core": core,
                **({"built": built} if built else {}),
            }
        )
        return
    changed = f", {report.changed} changed but kept as stored" if report.changed else ""
    read = f"read {report.read} messages ({report.added} new{changed}) from {source}; " if source else ""
    if report.notes and not report.episodes and not report.merged:  # --memory amem: notes straight from messages
        made = f"made {report.notes} notes"
    else:
        notes = f", stored as {report.notes} notes," if report.notes else ""
        made = f"made {report.episodes} episodes ({report.merged} merged into earlier ones) and {report.facts} facts{notes} in {report.windows} windows"
    if source and not report.added and not report.windows:  # a re-ingest that found nothing new and built nothing
        made = "nothing new to store or build"
        console().print(f"{read}{made}; {report.pending} messages pending")
    else:
        console().print(f"{read}{made} ({report.seconds:.1f} s); {report.pending} messages pending")
    if core:
        held = "the whole history" if core["whole_history"] else "the most recent part of the history"
        how = f"{core['read']} new tokens read" if core["outcome"] == "extended" else "read"
        console().print(
            f"[dim]core context: {core['tokens']} tokens ({held}), {how} in {core['seconds']:.1f} s and saved "
            f"({core['saved_bytes'] / 2**20:.0f} MB) for `ask`[/dim]"
        )
