"""`nemori ingest`: messages in, episodes out, resumable."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated

import typer

from nemori_cli.cli import options as opt
from nemori_cli.cli.build_options import MaxTokens, Neighbours, check_budget
from nemori_cli.cli.build_run import prepare_core, print_report, run_with_progress
from nemori_cli.cli.help import examples
from nemori_cli.cli.progress import wanted
from nemori_cli.cli.render import console, print_json, warn_changed
from nemori_cli.config import DEFAULT_NEIGHBOURS, DEFAULT_WINDOW
from nemori_cli.domain import InputFormatName, MemoryName
from nemori_cli.errors import ConfigError
from nemori_cli.services.ingest import AUTO_BUILD_NOW_S  # for --help: services/ingest.py decides --build auto by it

EXAMPLES = examples(
    "nemori ingest chat.jsonl",
    "nemori ingest conversations.json --dry-run     # the cost first",
    "nemori ingest conversations.json --build later # searchable now",
    "nemori ingest - --format jsonl < messages.jsonl",
)


class DistillMode(str, Enum):
    prediction = "prediction"
    direct = "direct"


class IndexOn(str, Enum):
    narrative = "narrative"
    messages = "messages"


class BuildWhen(str, Enum):
    auto = "auto"
    now = "now"
    later = "later"
    background = "background"


class PartitionBy(str, Enum):
    model = "model"
    similarity = "similarity"


# Method flags: given on the first ingest, recorded in the database, inherited
# by every later run. A later flag that disagrees is refused (never mixed).
MemoryOpt = Annotated[
    MemoryName | None,
    typer.Option(
        "--memory",
        metavar="MODE",
        help="How memory is kept (first ingest only): native (facts, consolidated), summary (one running summary), naive-rag "
        "(facts appended), amem (A-MEM notes, one per message) or nemori+amem (Nemori's facts as A-MEM notes).",
        show_default=False,
    ),
]
Distill = Annotated[
    DistillMode | None,
    typer.Option(
        "--distill",
        metavar="HOW",
        help="prediction (keep what memory could not predict) or direct (extract from the raw episode).",
        show_default=False,
    ),
]
Integrate = Annotated[
    bool | None,
    typer.Option("--integrate/--no-integrate", help="Merge an episode into the earlier one it continues (default on).", show_default=False),
]
FactsFlag = Annotated[
    bool | None,
    typer.Option("--facts/--no-facts", help="Distil semantic facts (default), or keep episodes only.", show_default=False),
]
IndexFlag = Annotated[
    IndexOn | None,
    typer.Option(
        "--index", metavar="WHAT", help="Index episodes on their narrative (default) or on their raw messages.", show_default=False
    ),
]
PartitionFlag = Annotated[
    PartitionBy | None,
    typer.Option(
        "--partition",
        metavar="HOW",
        help="Cut episodes where the model sees a new topic (model), or where the messages' embeddings say so, with no LLM "
        "call (similarity). Default: the model preset's (similarity for tiny and small).",
        show_default=False,
    ),
]
BuildOpt = Annotated[
    BuildWhen,
    typer.Option(
        "--build",
        metavar="WHEN",
        help="When the memory is built: now (in this run), later (store and index only: searchable at once; `nemori build` "
        "builds), background (store, then `nemori build --background`), or auto (now when the estimated model time is at most "
        f"{AUTO_BUILD_NOW_S:.0f} s, else later).",
    ),
]
DryRun = Annotated[
    bool,
    typer.Option("--dry-run", help="Estimate the work (new messages, LLM calls, tokens, minutes); write nothing, load no model."),
]


def _method(memory, distill, integrate, facts, index, partition=None) -> dict:
    """The method flags as memory/method.resolve takes them (None: not given)."""
    return {
        "memory": memory,
        "distill": distill.value if distill else None,
        "integrate": integrate,
        "facts": facts,
        "index": index.value if index else None,
        "partition": partition.value if partition else None,
    }


def _profile(store, settings, memory, distill, integrate, facts, index, partition=None):
    from nemori_cli.deps import new_memory_defaults
    from nemori_cli.memory.method import resolve

    return resolve(store, _method(memory, distill, integrate, facts, index, partition), new=new_memory_defaults(settings))


def _read(
    source: str,
    fmt: InputFormatName,
    sample: str | None,
    default_ts: str | None,
    sessions: str | None,
    conversations: list[str] | None = None,
    since: str | None = None,
    until: str | None = None,
):
    """The input read whole and checked (an ``importers.collect.Imported``), before anything is written; the flags checked first, by their names."""
    from nemori_cli.api import read_export
    from nemori_cli.importers.jsonl import parse_timestamp
    from nemori_cli.importers.selection import choose

    default_timestamp = None
    if default_ts:
        try:
            default_timestamp = parse_timestamp(default_ts)
        except ValueError:
            raise ConfigError(f"--default-timestamp {default_ts!r} is not ISO 8601 (e.g. 2023-05-08T13:56:00)") from None
    selection = choose(tuple(conversations or ()), since, until, names=("--since", "--until"))
    stream = sys.stdin.buffer if source == "-" else None
    return read_export(
        "<stdin>" if stream else source,
        format=fmt,
        stream=stream,
        selection=selection,
        default_timestamp=default_timestamp,
        sample=sample,
        sessions=sessions,
    )


def _say_left_out(imported, json_out: bool) -> None:
    """What the reader left out (system, tool, hidden messages...), as one note on stderr (--json puts it in the report); a very large message, as another."""
    line = imported.left_out_line()
    if line and not json_out:
        sys.stderr.write(f"nemori: {line}\n")
    large = imported.large_line()  # said with --json too: it is what is happening, not part of the report
    if large:
        sys.stderr.write(f"nemori: {large}\n")


def ingest(
    source: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE",
            help="A file of messages or a chat export (JSON Lines, ChatGPT, Claude, WhatsApp, Telegram, ...), or - for stdin.",
            show_default=False,
        ),
    ],
    # What a newcomer needs first comes first: --help lists the options in this order.
    build: BuildOpt = BuildWhen.auto,
    dry_run: DryRun = False,
    db_path: opt.Db = None,
    user: opt.User = None,
    model: opt.Model = None,
    fmt: Annotated[
        InputFormatName,
        typer.Option(
            "--format",
            "-f",
            metavar="FORMAT",
            help="auto (told from the first bytes), jsonl, chatgpt or claude (conversations.json), whatsapp (.txt or .zip), "
            "telegram (result.json), openai (role/content lists), locomo or longmemeval.",
        ),
    ] = "auto",
    sample: Annotated[str | None, typer.Option(metavar="ID", help="LoCoMo sample id, e.g. conv-26.")] = None,
    sessions: Annotated[str | None, typer.Option(metavar="RANGE", help="LoCoMo sessions to read, e.g. 1-3.")] = None,
    conversation: Annotated[
        list[str] | None,
        typer.Option(
            "--conversation",
            metavar="ID_OR_TITLE",
            help="Read only this conversation: its id, or its title in any case (repeatable). LongMemEval: a question_id.",
            show_default=False,
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            metavar="DATE", help="Only messages at or after this date or date-time (ISO 8601; no zone means UTC).", show_default=False
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(metavar="DATE", help="Only messages at or before this date (the whole day) or date-time.", show_default=False),
    ] = None,
    default_timestamp: Annotated[
        str | None,
        typer.Option(
            metavar="TIME", help="Time for messages that have none (ISO 8601); OpenAI-style messages get it plus one second each."
        ),
    ] = None,
    flush: Annotated[
        bool,
        typer.Option("--flush/--no-flush", help="Make episodes of the last messages too (default), or keep them pending for more."),
    ] = True,
    window: opt.Window = DEFAULT_WINDOW,
    memory: MemoryOpt = None,
    distill: Distill = None,
    integrate: Integrate = None,
    facts: FactsFlag = None,
    index: IndexFlag = None,
    partition: PartitionFlag = None,
    max_tokens: MaxTokens = None,
    neighbours: Neighbours = DEFAULT_NEIGHBOURS,
    parallel: opt.Parallel = None,
    workers: opt.Workers = None,
    progress: opt.ShowProgress = None,
    embedder: opt.EmbedderName = None,
    json_out: opt.Json = False,
) -> None:
    """Store messages, then build their memory: episodes and facts.

    Resumable, and re-ingesting adds nothing. A long build can be left for
    later (--build later): the messages are searchable at once, and
    `nemori build` makes their episodes and facts.
    """
    from nemori_cli.api import Memory, shown_name
    from nemori_cli.services.ingest import BuildSpec, check_workers, when_to_build

    check_budget(max_tokens)
    settings = opt.settings(db_path, user, model, embedder)
    settings.parallel = parallel or settings.parallel
    settings.workers = workers or settings.workers
    check_workers(settings)  # a local model with --workers is refused before the input is read
    imported = _read(source, fmt, sample, default_timestamp, sessions, conversation, since, until)
    incoming, namespace = imported.messages, imported.namespace
    source = shown_name(source)  # as reports print it
    _say_left_out(imported, json_out)
    read_as = {"format": imported.format, "conversations": imported.conversations, "left_out": imported.left_out}
    if dry_run:
        from nemori_cli.cli import dry_run as dry

        def profile_of(store):
            return _profile(store, settings, memory, distill, integrate, facts, index, partition)

        plan = dry.plan(settings, incoming, namespace, window=window, profile_of=profile_of, max_tokens=max_tokens)
        plan.update(read_as)
        warn_changed(plan["changed"], plan.pop("changed_ids"), would=True)
        dry.render(plan, source, json_out)
        return
    method = _method(memory, distill, integrate, facts, index, partition)
    if not flush and build in (BuildWhen.later, BuildWhen.background):
        raise ConfigError(
            f"--no-flush keeps the tail pending while episodes are made now; with --build {build.value} nothing is made now: drop one of them"
        )
    # --no-flush asks for episodes now, all but the tail; auto is now when the estimate is small (services/ingest.py)
    spec = BuildSpec(settings, method, window, neighbours)
    when = BuildWhen(when_to_build(build.value, flush=flush, spec=spec, incoming=incoming, namespace=namespace))
    if when != BuildWhen.now:
        _store_only(settings, imported, method, window, neighbours, when, source, json_out, read_as, max_tokens)
        return
    with Memory.from_settings(settings, window=window, neighbours=neighbours, **method) as target:
        target.load_model()  # before the progress bar: a model that cannot load fails on a clean screen

        # The changed messages are named before the episodes are made, as they are found.
        def run(update):
            return target.ingest(
                imported, flush=flush, max_tokens=max_tokens, progress=update, on_stored=lambda ids: warn_changed(len(ids), list(ids))
            )

        result = run_with_progress(run, target, show_progress=wanted(progress))
        core = prepare_core(target, result.report)
    print_report(result.report, source, json_out, max_tokens, read_as, core)


def _store_only(
    settings, imported, method: dict, window: int, neighbours: int, when: BuildWhen, source: str, json_out: bool, read_as: dict, max_tokens
) -> None:
    """--build later or background: stored and indexed (no model loaded), then, for background, `nemori build --background`."""
    from nemori_cli.api import Memory

    with Memory.from_settings(settings, window=window, neighbours=neighbours, **method) as target:
        result = target.ingest(imported, build=False, on_stored=lambda ids: warn_changed(len(ids), list(ids)))
        state = target.build_state()
    report = result.report
    worker = None
    if when == BuildWhen.background and state.pending and state.worker_pid is None:
        from nemori_cli.cli.background import start_background
        from nemori_cli.pipeline import lock

        # Started before the report is printed: a worker that cannot start is the one line this command ends with.
        worker = start_background(
            lock.for_settings(settings),
            settings,
            json_out=False,
            quiet=True,
            max_tokens=max_tokens,
            neighbours=neighbours,
            window=window,
        )
    if json_out:
        print_json(
            {
                "source": source,
                **read_as,
                **vars(report),
                "seconds": round(report.seconds, 2),
                "core": None,
                "build": when.value,
                "built": state.as_json(),
                "worker": worker,
            }
        )
    else:
        from nemori_cli.pipeline.built import clock

        stored = (
            f"and stored them in {report.seconds:.1f} s: searchable now"
            if report.added
            else "all stored before: nothing new to store"  # not "stored them in 0.0 s", which reads as if it did
        )
        console().print(f"read {report.read} messages ({report.added} new) from {source} {stored}", soft_wrap=True)
        if state.pending:
            eta = f" (about {clock(state.eta_seconds)} of model time at {state.eta_source} rates)" if state.eta_seconds is not None else ""
            if state.worker_pid is not None:
                how = f"the build already running (pid {state.worker_pid}) builds them"
            elif worker:
                how = f"building them in the background (pid {worker['pid']}; log {worker['log']}; `nemori build --stop` stops it)"
            else:
                how = "`nemori build` builds them (`--background` to run it behind)"
            console().print(f"{state.pending} messages are pending their episodes and facts{eta}; {how}", soft_wrap=True)
