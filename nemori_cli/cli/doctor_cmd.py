"""`nemori doctor`: install checks, a probe of the model on a sample, a verdict."""

from __future__ import annotations

from typing import Annotated

import typer

from nemori_cli.cli import options as opt
from nemori_cli.cli.help import examples
from nemori_cli.cli.render import console, esc, print_json

EXAMPLES = examples("nemori doctor", "nemori doctor --model base", "nemori doctor --no-probe --json")

NoProbe = Annotated[bool, typer.Option("--no-probe", help="Only the install checks; do not run the model on the sample.")]


def doctor_cmd(
    model: opt.Model = None,
    embedder: opt.EmbedderName = None,
    no_probe: NoProbe = False,
    json_out: opt.Json = False,
) -> None:
    """Check the install and the model: is it fit for ingesting?

    Checks the install, then runs every pipeline stage on a 12-message
    sample. Prints each check, per-stage figures (calls, valid answers, retries,
    fallbacks, tokens, seconds) and a verdict with what to do. Your database
    is never opened: the probe uses a temporary file. Exit code 0 when the
    model is fit or usable with fallbacks (or, with --no-probe, the install
    checks pass); 1 when not fit.
    """
    from nemori_cli.doctor.run import run

    settings = opt.settings(None, None, model, embedder)
    report = run(settings, probe=not no_probe)
    if json_out:
        print_json(report.to_json())
    else:
        _render(report)
    if report.exit_code:
        raise typer.Exit(report.exit_code)


def _render(report) -> None:
    from nemori_cli.doctor import verdict

    out = console()
    for c in report.checks:
        mark = "[green]ok  [/green]" if c.ok else "[red]FAIL[/red]"
        out.print(f"{mark} {c.name:<13} {esc(c.detail)}", soft_wrap=True)
    if report.stages:
        out.print(_stage_table(report.stages))
        o = report.overall
        out.print(
            f"schema-valid on first attempt: {_pct(o['schema_valid_rate'])} of {o['calls']} calls; "
            f"fallbacks: {_pct(o['fallback_rate'])}; {_num(o['tokens_per_s'])} tok/s ({_num(o['output_tokens_per_s'])} output tok/s)"
        )
        out.print(
            f"about {o['seconds_per_100_messages']:.0f} s per 100 messages (ingest of the {o['sample_messages']}-message sample took {o['ingest_seconds']:.1f} s)"
        )
        if report.sample_answer:
            out.print(f"[dim]sample answer: {esc(report.sample_answer)}[/dim]", soft_wrap=True)
    colour = {verdict.FIT: "green", verdict.USABLE: "yellow", verdict.NOT_FIT: "red"}.get(report.verdict, "cyan")
    out.print(f"[bold {colour}]{report.model}: {report.verdict}[/bold {colour}]")
    for line in report.advice:
        out.print(f"  - {esc(line)}", soft_wrap=True)
    if report.rates:
        out.print(f"[dim]rates for cost estimates: {esc(report.rates)}[/dim]")


def _stage_table(stages: dict):
    """Fits 80 columns: one space between columns, valid answers as first-attempt/calls."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, padding=0, pad_edge=False)  # the box's blank rule parts space the columns
    table.add_column("stage", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for header in ("valid", "retry", "fail", "fallb", "repair", "tokens", "s", "tok/s", "out/s"):
        table.add_column(header, justify="right")
    for name, s in stages.items():
        table.add_row(
            name,
            _STATUS_SHORT.get(s["status"], s["status"]),
            f"{s['valid_first_attempt']}/{s['calls']}",
            *(str(s[k]) for k in ("retries", "failed", "fallbacks", "repairs")),
            f"{s['prompt_tokens']}+{s['output_tokens']}",
            f"{s['seconds']:.1f}",
            _num(s["tokens_per_s"]),
            _num(s["output_tokens_per_s"]),
        )
    return table


_STATUS_SHORT = {"no valid answer": "no valid"}


def _num(value) -> str:
    return "-" if value is None else f"{value:.0f}"


def _pct(value) -> str:
    return "-" if value is None else f"{value:.0%}"
