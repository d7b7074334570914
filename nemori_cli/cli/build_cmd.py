"""`nemori build`: make the memory of what `ingest` stored, in the foreground or behind the user's back.

`ingest --build later` returns once the messages are stored and indexed; this
command does the LLM work. Oldest first, always: the method reads time
forwards (a fact supersedes the facts before it, an episode continues the one
before it), so building the newest conversations first would let an old fact
retire a newer one. What a user needs first, the recent conversations, is
answerable from their raw turns before any of it is built.

One build per memory, a store and a user (pipeline/lock.py). `--background` starts the same
command detached, with its output in a log file in nemori's cache directory;
`--stop` asks it (SIGTERM) to stop after the episode in hand. A `kill -9`
loses nothing: every episode is one transaction, and the next `build` goes on
from what is stored.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Annotated

import typer

from nemori_cli.cli import options as opt
from nemori_cli.cli.background import start_background
from nemori_cli.cli.build_options import MaxTokens, Neighbours, check_budget
from nemori_cli.cli.build_run import prepare_core, print_report, run_with_progress
from nemori_cli.cli.help import examples
from nemori_cli.cli.progress import wanted
from nemori_cli.cli.render import print_json
from nemori_cli.config import DEFAULT_NEIGHBOURS, DEFAULT_WINDOW

# How long `--stop` waits for the worker to finish the episode in hand.
STOP_WAIT_S = 300.0

EXAMPLES = "nemori build\nnemori build --background\nnemori build --stop"  # the epilog: cli/help.py shows it as is
FLUSH_EXAMPLES = examples("nemori flush                  # the same as: nemori build")


def build_cmd(
    background: Annotated[
        bool,
        typer.Option(
            "--background",
            help="Build in a detached process and return at once (one per database; its log is in nemori's cache directory).",
        ),
    ] = False,
    stop: Annotated[
        bool, typer.Option("--stop", help="Stop the build running on this database after the episode in hand (the rest stays pending).")
    ] = False,
    max_tokens: MaxTokens = None,
    neighbours: Neighbours = DEFAULT_NEIGHBOURS,
    parallel: opt.Parallel = None,
    workers: opt.Workers = None,
    progress: opt.ShowProgress = None,
    window: opt.Window = DEFAULT_WINDOW,
    db_path: opt.Db = None,
    user: opt.User = None,
    model: opt.Model = None,
    embedder: opt.EmbedderName = None,
    json_out: opt.Json = False,
) -> None:
    """Build the episodes and facts of every pending message.

    Oldest first, and resumable; --background runs it behind you and
    `nemori stats` shows how far it got.
    """
    from nemori_cli.errors import ConfigError
    from nemori_cli.pipeline import lock
    from nemori_cli.services.ingest import check_workers

    check_budget(max_tokens)
    if background and stop:
        raise ConfigError("--background and --stop do not go together: --stop ends the build that --background started")
    settings = opt.settings(db_path, user, model, embedder)
    settings.parallel = parallel or settings.parallel
    settings.workers = workers or settings.workers
    check_workers(settings)
    build_lock = lock.for_settings(settings)
    if stop:
        _stop(build_lock, settings, json_out)
    elif background:
        start_background(build_lock, settings, json_out, max_tokens=max_tokens, neighbours=neighbours, window=window)
    else:
        foreground(settings, json_out, max_tokens=max_tokens, neighbours=neighbours, window=window, show_progress=wanted(progress))


def foreground(settings, json_out: bool, *, max_tokens, neighbours: int, window: int, show_progress: bool) -> None:
    """Build now, in this process; the lock is taken by Memory.build (a running build is refused before the model loads)."""
    from nemori_cli.api import Memory
    from nemori_cli.services.ingest import BuildRunning

    stop = threading.Event()
    # SIGTERM (`build --stop`) ends the run between two units of work, never inside one.
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with Memory.from_settings(settings, window=window, neighbours=neighbours) as memory:
            state = memory.build_state()
            if state.worker_pid is not None:
                raise BuildRunning(settings.store_name, settings.user, state.worker_pid)
            if state.pending:
                if show_progress:  # beside the bar: the estimate it starts from, before the bar's own rate takes over
                    sys.stderr.write(f"nemori: {_plan_line(state)}\n")
                    sys.stderr.flush()
                memory.load_model(create=False)  # before the progress bar, as ingest does
            result = run_with_progress(
                lambda update: memory.build(max_tokens=max_tokens, progress=update, stop=stop), memory, show_progress=show_progress
            )
            core = prepare_core(memory, result.report)
            after = memory.build_state(eta=False)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if stop.is_set():
        sys.stderr.write(f"nemori: stopped as asked; {result.report.pending} messages pending: `nemori build` resumes\n")
    print_report(result.report, None, json_out, max_tokens, core=core, built=after.as_json())


def flush_cmd(
    max_tokens: MaxTokens = None,
    neighbours: Neighbours = DEFAULT_NEIGHBOURS,
    parallel: opt.Parallel = None,
    workers: opt.Workers = None,
    progress: opt.ShowProgress = None,
    window: opt.Window = DEFAULT_WINDOW,
    db_path: opt.Db = None,
    user: opt.User = None,
    model: opt.Model = None,
    embedder: opt.EmbedderName = None,
    json_out: opt.Json = False,
) -> None:
    """The older name of `nemori build` (in the foreground).

    Every pending message into episodes and facts now, with the memory's
    recorded method.
    """
    from nemori_cli.services.ingest import check_workers

    check_budget(max_tokens)
    settings = opt.settings(db_path, user, model, embedder)
    settings.parallel = parallel or settings.parallel
    settings.workers = workers or settings.workers
    check_workers(settings)
    foreground(settings, json_out, max_tokens=max_tokens, neighbours=neighbours, window=window, show_progress=wanted(progress))


def _plan_line(state) -> str:
    from nemori_cli.pipeline.built import clock

    eta = f"; about {clock(state.eta_seconds)} of model time at {state.eta_source} rates" if state.eta_seconds is not None else ""
    since = f" (said from {state.pending_from:%Y-%m-%d} on)" if state.pending_from else ""
    return f"building {state.pending} pending messages{since}, oldest first{eta}"


def _stop(build_lock, settings, json_out: bool) -> None:
    from nemori_cli.errors import NemoriError

    holder = build_lock.holder()
    for _ in range(50):  # a holder that has just taken the lock writes its pid a moment later
        if holder is None or holder.pid is not None:
            break
        time.sleep(0.02)
        holder = build_lock.holder()
    if holder is None or holder.pid is None:
        if json_out:
            print_json({"stopped": False, "running": False, "db": settings.store_name})
        else:
            sys.stderr.write(f"nemori: no build is running on {settings.store_name} for user {settings.user}\n")
        return
    if holder.elsewhere:  # a PostgreSQL store's build on another machine: its pid is not one of ours
        raise NemoriError(
            f"the build of {settings.store_name} for user {settings.user} runs on {holder.host} (pid {holder.pid}); stop it there"
        )
    try:
        os.kill(holder.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it ended between the look and the signal
    except PermissionError:
        raise NemoriError(
            f"the build of {settings.store_name} (pid {holder.pid}) belongs to another system user; this one may not stop it"
        ) from None
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline and build_lock.holder() is not None:
        time.sleep(0.2)
    stopped = build_lock.holder() is None
    if json_out:
        print_json({"stopped": stopped, "running": not stopped, "pid": holder.pid, "db": settings.store_name})
    elif stopped:
        sys.stderr.write(f"nemori: the build (pid {holder.pid}) stopped; what it had not built is pending: `nemori build` resumes\n")
    else:
        sys.stderr.write(f"nemori: asked the build (pid {holder.pid}) to stop; it stops once the episode in hand is stored\n")
