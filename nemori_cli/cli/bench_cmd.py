"""`nemori bench locomo|longmemeval|report|systems`: systems side by side on the field's benchmarks."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from nemori_cli.cli import options as opt
from nemori_cli.cli.help import App, examples
from nemori_cli.cli.render import console, print_json
from nemori_cli.errors import InputError

bench_app = App(
    help="Benchmarks: LoCoMo and LongMemEval, side by side.\n\nSystems compared on scores and costs.",
    no_args_is_help=True,
    epilog=examples("nemori bench systems", "nemori bench locomo locomo10.json --sample conv-26 --sessions 1-3"),
)

Systems = Annotated[str, typer.Option("--systems", metavar="LIST", help="Comma-separated systems or groups (see `nemori bench systems`).")]
Questions = Annotated[
    int | None,
    typer.Option("--questions", min=1, metavar="N", help="At most this many questions (LoCoMo: per sample).", show_default=False),
]
JudgeModel = Annotated[
    str | None,
    typer.Option("--judge-model", metavar="NAME", help="LLM preset that grades answers (default: no judge).", show_default=False),
]
AnswerModel = Annotated[
    str | None,
    typer.Option(
        "--answer-model",
        metavar="NAME",
        help="Answer with this preset instead of --model; each system is then reported as SYSTEM@NAME.",
        show_default=False,
    ),
]
Out = Annotated[
    Path | None,
    typer.Option(
        "--out",
        metavar="DIR",
        help="Output folder; rerunning into it resumes (default bench-results/BENCHMARK-MODEL).",
        show_default=False,
    ),
]
BenchDb = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="URL",
        help="Keep the memories in this PostgreSQL database (postgresql://...), a schema each, instead of a SQLite file "
        "each in the output folder.",
        show_default=False,
    ),
]

Against = Annotated[
    str | None,
    typer.Option(
        "--against",
        metavar="SYSTEM",
        help="The reference every system is paired with (mean difference, 95% interval, wins/losses); default the first baseline run.",
        show_default=False,
    ),
]
Split = Annotated[
    str | None,
    typer.Option(
        "--split",
        metavar="PART",
        help="Which part of the dev data this run is: tune (choices are made on it) or confirm (run once to check them).",
        show_default=False,
    ),
]
SPLITS = ("tune", "confirm")

LOCOMO_SCORES = ("set_f1", "official_f1", "bleu1", "evidence_recall")
LONGMEMEVAL_SCORES = ("match", "set_f1", "evidence_recall")


def _benchmark(name: str):
    """(question groups, score keys, title, judge factory, rescorer) of a benchmark."""
    from nemori_cli.bench import locomo, longmemeval

    if name == "locomo":
        return tuple(locomo.CATEGORIES.values()), LOCOMO_SCORES, "LoCoMo", locomo.judge_with, locomo.rescore
    if name == "longmemeval":
        return longmemeval.TYPES, LONGMEMEVAL_SCORES, "LongMemEval", longmemeval.judge_with, longmemeval.rescore
    raise InputError(f"unknown benchmark {name!r} in the folder's config.json")


def _report(log, json_out: bool, against: str | None = None) -> None:
    from nemori_cli.bench import baselines, charts, report_markdown
    from nemori_cli.bench import report as reporting

    benchmark = log.config["benchmark"]
    groups, score_keys, title, _, rescore = _benchmark(benchmark)
    # Text scores are recomputed from each answer, so a scoring fix reaches runs recorded before it.
    records = [rescore(r) if r.get("kind") == "answer" and r.get("benchmark") == benchmark else r for r in log.records]
    report = reporting.build(
        records,
        log.config,
        benchmark=benchmark,
        groups=groups,
        score_keys=score_keys,
        against=against or log.config.get("against"),
        baselines=tuple(s.name for s in baselines.OFFERED.systems),
    )
    report["dropped_lines"] = log.dropped_lines
    text = report_markdown.markdown(report, groups=groups, score_keys=score_keys, title=title)
    text += charts.markdown(charts.write(log.out, report, groups=groups, score_key=score_keys[0]))
    reporting.write(log.out, report, text)
    if json_out:
        print_json(report)
    else:
        console().print(text, markup=False, highlight=False, soft_wrap=True)
        console().print(f"[dim]report: {log.out / 'report.md'} and {log.out / 'report.json'}[/dim]")


def _interrupted(out: Path):
    sys.stderr.write(f"nemori: interrupted; finished work is kept in {out}: run the same command to resume\n")
    return typer.Exit(130)


@dataclass(frozen=True)
class RunChoices:
    """What `bench locomo` and `bench longmemeval` take alike besides their questions: the systems, the folder, the models."""

    systems: str
    split: str | None
    against: str | None
    judge_model: str | None
    out: Path | None
    db: str | None
    answer_model: str | None
    progress: bool | None
    json_out: bool


def _run(benchmark: str, module, settings, file: Path, units, scope: str, scope_key: dict, choices: RunChoices) -> None:
    """What `bench locomo` and `bench longmemeval` do once their questions are chosen: ``module`` (bench/locomo.py or
    bench/longmemeval.py) judges and scores; the models, systems and folder are checked, then the run, then its report."""
    from nemori_cli import __version__
    from nemori_cli.bench import run_config
    from nemori_cli.bench.results import ResultLog
    from nemori_cli.bench.run import BenchRunner
    from nemori_cli.cli.progress import BenchBar, wanted

    c = choices
    out = c.out or _default_out(benchmark, settings)
    stores = _stores(c.db, out)
    scope_key = {**scope_key, "split": c.split}  # a tuning run and a confirmation run never share a folder
    _check_against(c.against, c.systems)
    shared, judge_llm, chosen, config = run_config.prepare(
        settings, c.judge_model, file, benchmark, c.systems, scope, scope_key, out, c.answer_model, stores, version=__version__
    )
    config["split"], config["against"] = c.split, c.against
    judge = module.judge_with(judge_llm, config["judge"]["name"]) if judge_llm else None
    log = ResultLog(out, config, identity_keys=run_config.IDENTITY)
    bar = BenchBar(wanted(c.progress))
    try:
        BenchRunner(benchmark, log, shared, chosen, module.score, judge, bar, stores).run(units)
    except KeyboardInterrupt:
        bar.close()
        raise _interrupted(out) from None
    bar.close()
    _report(log, c.json_out, c.against)


def _check_against(against: str | None, systems: str) -> None:
    """--against must name one of the run's systems; refused before any model loads."""
    if against is None:
        return
    from nemori_cli.bench import catalog
    from nemori_cli.errors import ConfigError

    names = [s.name for s in catalog.resolve(systems)]
    if against.split("@")[0] not in names:
        raise ConfigError(f"--against {against!r}: not among --systems ({', '.join(names)})")


def _stores(db: str | None, out: Path):
    """Where this run keeps its memories (bench/stores.py); a bad --db is refused before anything is loaded."""
    from nemori_cli.bench.stores import bench_stores

    return bench_stores(db, out)


def _default_out(benchmark: str, settings) -> Path:
    from nemori_cli import deps

    return Path("bench-results") / f"{benchmark}-{deps.llm_preset(settings).name}"


def _folders(flag: str, what: str):
    """A repeatable option naming earlier results folders (bench/question_filter.py reads them)."""
    return typer.Option(flag, metavar="FOLDER", help=what, show_default=False)


@bench_app.command(
    "locomo",
    epilog=examples(
        "nemori bench locomo locomo10.json --sample conv-26 --sessions 1-5",
        "nemori bench locomo locomo10.json --systems nemori,rag --judge-model base",
    ),
)
def locomo_cmd(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A LoCoMo file (e.g. locomo10.json).", show_default=False)],
    sample: Annotated[
        list[str] | None, typer.Option("--sample", metavar="ID", help="Sample id (repeatable; default all).", show_default=False)
    ] = None,
    sessions: Annotated[
        str | None,
        typer.Option(
            metavar="RANGE",
            help="Sessions to ingest, e.g. 1-5 (default all); only questions whose evidence lies inside are asked.",
            show_default=False,
        ),
    ] = None,
    questions: Questions = None,
    systems: Systems = "nemori,full-context,rag",
    adversarial: Annotated[
        bool, typer.Option("--adversarial/--no-adversarial", help="Ask category 5 too, scored by the official abstention rule.")
    ] = False,
    haystack: Annotated[
        str | None,
        typer.Option(
            "--haystack",
            metavar="IDS",
            help="Comma-separated other samples whose sessions are interleaved by date with each --sample's: a long history.",
            show_default=False,
        ),
    ] = None,
    unasked: Annotated[
        list[Path] | None,
        _folders(
            "--unasked", "Leave out every question that this results folder answered (repeatable): a confirmation split no run has read."
        ),
    ] = None,
    asked: Annotated[
        list[Path] | None,
        _folders("--asked", "Only the questions that this results folder answered (repeatable): a tuning split of questions already read."),
    ] = None,
    matching: Annotated[
        str | None,
        typer.Option("--matching", metavar="REGEX", help="Only the questions whose text matches (case-insensitive).", show_default=False),
    ] = None,
    split: Split = None,
    against: Against = None,
    judge_model: JudgeModel = None,
    out: Out = None,
    db: BenchDb = None,
    model: opt.Model = None,
    answer_model: AnswerModel = None,
    embedder: opt.EmbedderName = None,
    progress: opt.ShowProgress = None,
    json_out: opt.Json = False,
) -> None:
    """Run LoCoMo: each system answers each sample's questions.

    Per sample and system, a fresh memory of the chosen sessions, then the
    questions about them.
    """
    from nemori_cli.bench import locomo, question_filter
    from nemori_cli.importers.locomo import parse_session_range

    settings = opt.settings(None, None, model, embedder)
    session_range = parse_session_range(sessions)
    _check_split(split)
    others = [h.strip() for h in (haystack or "").split(",") if h.strip()]
    if haystack is not None and not others:
        raise InputError("--haystack: no sample named; expected e.g. --haystack conv-30,conv-41")
    for flag, folders in (("--unasked", unasked), ("--asked", asked)):
        if out is not None and any(f.resolve() in (out.resolve(), (out / "results.jsonl").resolve()) for f in folders or []):
            raise InputError(f"{flag} {out}: that is this run's own --out folder, whose questions change as it runs")
    keep = question_filter.QuestionFilter(
        question_filter.asked_in(list(unasked or [])),
        question_filter.pattern(matching) if matching is not None else None,
        question_filter.asked_in(list(asked), "--asked") if asked else None,
    )
    units = locomo.units(file, list(sample or []), session_range, questions, adversarial, others, keep) if file.is_file() else None
    targets = ", ".join(dict.fromkeys(q.meta["sample"] for u in units or [] for q in u.questions)) if others else None
    scope = f"samples {targets or ', '.join(u.key for u in units or [])}; sessions {sessions or 'all'}; " + (
        "category 5 included" if adversarial else "category 5 excluded"
    )
    if others:
        sizes = ", ".join(f"{u.key} {len(u.messages):,} turns" for u in {u.key: u for u in units or []}.values())
        scope += f"; inside a haystack of {', '.join(others)} ({sizes})"
    scope_key = {"sessions": sessions, "adversarial": adversarial, **({"haystack": sorted(others)} if others else {}), **keep.key()}
    if keep.active():
        scope += (
            f"; {sum(len(u.questions) for u in units or [])} questions"
            + (f" none of {len(unasked or [])} earlier folders answered" if keep.asked else "")
            + (f" that {len(asked or [])} earlier folders answered" if asked else "")
            + (f" matching {matching!r}" if matching else "")
        )
    choices = RunChoices(systems, split, against, judge_model, out, db, answer_model, progress, json_out)
    _run("locomo", locomo, settings, file, units, scope, scope_key, choices)


def _check_split(split: str | None) -> None:
    if split is not None and split not in SPLITS:
        raise InputError(f"--split {split!r}: expected one of {', '.join(SPLITS)}")


@bench_app.command("longmemeval", epilog=examples("nemori bench longmemeval oracle.json --questions 20 --judge-model base"))
def longmemeval_cmd(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A LongMemEval file (oracle, S or M format).", show_default=False)],
    questions: Questions = None,
    per_type: Annotated[
        int | None,
        typer.Option(
            "--per-type",
            min=1,
            metavar="N",
            help="At most this many questions of each type (abstention counts as one).",
            show_default=False,
        ),
    ] = None,
    systems: Systems = "nemori,full-context,rag",
    haystack: Annotated[
        int | None,
        typer.Option(
            "--haystack",
            min=1,
            metavar="N",
            help="Put each question's sessions among those of this many other questions, by date: a long history.",
            show_default=False,
        ),
    ] = None,
    split: Split = None,
    against: Against = None,
    judge_model: JudgeModel = None,
    out: Out = None,
    db: BenchDb = None,
    model: opt.Model = None,
    answer_model: AnswerModel = None,
    embedder: opt.EmbedderName = None,
    progress: opt.ShowProgress = None,
    json_out: opt.Json = False,
) -> None:
    """Run LongMemEval: one fresh memory per question.

    Each question's sessions are ingested in order, and its date is given.
    """
    from nemori_cli.bench import longmemeval

    settings = opt.settings(None, None, model, embedder)
    units = longmemeval.units(file, questions, per_type, haystack) if file.is_file() else None
    scope = f"{len(units or [])} questions" + (f" (at most {per_type} per type)" if per_type else "") + ", one memory each"
    if haystack:
        sizes = [len(u.messages) for u in units or []]
        scope += f", each inside the sessions of {haystack} other questions ({min(sizes, default=0)}-{max(sizes, default=0)} turns)"
    _check_split(split)
    choices = RunChoices(systems, split, against, judge_model, out, db, answer_model, progress, json_out)
    _run("longmemeval", longmemeval, settings, file, units, scope, {"haystack": haystack} if haystack else {}, choices)


def _folder(folder: Path):
    from nemori_cli.bench.results import CONFIG, RESULTS, ResultLog

    if not (folder / CONFIG).is_file() or not (folder / RESULTS).is_file():
        raise InputError(f"{folder}: not a bench output folder (no {CONFIG} and {RESULTS})")
    try:
        config = json.loads((folder / CONFIG).read_text())
    except ValueError:
        raise InputError(f"{folder / CONFIG}: not JSON") from None
    return ResultLog(folder, config, identity_keys=())


@bench_app.command("report", epilog=examples("nemori bench report bench-results/locomo-small"))
def report_cmd(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="A bench output folder.", show_default=False)],
    against: Against = None,
    json_out: opt.Json = False,
) -> None:
    """Rebuild a run's report.md and report.json from its records.

    No model is needed.
    """
    _report(_folder(folder), json_out, against)


@bench_app.command("judge", epilog=examples("nemori bench judge bench-results/locomo-small --judge-model openai"))
def judge_cmd(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="A bench output folder.", show_default=False)],
    judge_model: Annotated[str, typer.Option("--judge-model", metavar="NAME", help="LLM preset that grades the answers.")],
    progress: opt.ShowProgress = None,
    json_out: opt.Json = False,
) -> None:
    """Grade a finished run's answers with an LLM judge.

    Resumable; the report is then rebuilt with the labels.
    """
    from nemori_cli import deps
    from nemori_cli.bench import run_config
    from nemori_cli.bench.run import judge_missing
    from nemori_cli.cli.progress import BenchBar, wanted

    log = _folder(folder)
    benchmark = log.config["benchmark"]
    judge_with = _benchmark(benchmark)[3]
    settings = opt.settings(None, None, judge_model, None)
    preset = deps.llm_preset(settings)
    judge = judge_with(deps.build_llm(settings), preset.name)
    bar = BenchBar(wanted(progress))
    bar.set_total(len(log.of_kind("answer")))
    try:
        judge_missing(log, benchmark, judge, bar.question_done)
    except KeyboardInterrupt:
        bar.close()
        raise _interrupted(folder) from None
    bar.close()
    log.config["judge"] = run_config.model_info(preset)
    (folder / "config.json").write_text(json.dumps(log.config, indent=2, sort_keys=True) + "\n")
    _report(log, json_out)


@bench_app.command("systems", epilog=examples("nemori bench systems", "nemori bench systems --json"))
def systems_cmd(json_out: opt.Json = False) -> None:
    """List the systems and groups `--systems` accepts."""
    from nemori_cli.bench import catalog

    found, groups = catalog.available(), catalog.groups()
    if json_out:
        print_json({"systems": {n: s.description for n, s in found.items()}, "groups": groups})
        return
    out = console()
    for name, system in found.items():
        out.print(f"[bold]{name}[/bold]  {system.description}", soft_wrap=True, highlight=False)
    for name, members in groups.items():
        out.print(f"[bold]{name}[/bold]  = {', '.join(members)}", highlight=False)
