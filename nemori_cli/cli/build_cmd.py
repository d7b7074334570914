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
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Annotated

import typer

from nemori_cli.cli import options as opt
from nemori_cli.cli.ingest import MaxTokens, Neighbours, check_budget, prepare_core, print_report, run_with_progress  # noqa: I001
from nemori_cli.cli.progress import wanted
from nemori_cli.cli.render import print_json
from nemori_cli.config import DEFAULT_NEIGHBOURS, DEFAULT_WINDOW

# How long `--background` waits to see its worker take the lock and load its model (so a model that
# cannot load is one line here, not only in the log), and how long `--stop` waits for the worker to
# finish the episode in hand.
START_WAIT_S = 120.0
STOP_WAIT_S = 300.0

EXAMPLES = "nemori build\nnemori build --background\nnemori build --stop"  # the epilog: cli/help.py shows it as is


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
    from nemori_cli.api import check_workers
    from nemori_cli.errors import ConfigError
    from nemori_cli.pipeline import lock

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
    from nemori_cli.api import BuildRunning, Memory

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


def _plan_line(state) -> str:
    from nemori_cli.pipeline.built import clock

    eta = f"; about {clock(state.eta_seconds)} of model time at {state.eta_source} rates" if state.eta_seconds is not None else ""
    since = f" (said from {state.pending_from:%Y-%m-%d} on)" if state.pending_from else ""
    return f"building {state.pending} pending messages{since}, oldest first{eta}"


def log_path(build_lock) -> Path:
    return build_lock.path.with_suffix(".log")


def start_background(build_lock, settings, json_out: bool, *, quiet: bool = False, max_tokens, neighbours: int, window: int) -> dict | None:
    """Start `nemori build` detached (its own session, so the terminal's Ctrl-C and hang-up do not reach it) and see it load its model and take the lock.

    Returns the worker's pid and log (None when nothing was pending).
    """
    from nemori_cli import deps
    from nemori_cli.api import BuildRunning, Memory
    from nemori_cli.config import child_environment

    holder = build_lock.holder()
    if holder is not None:
        raise BuildRunning(settings.store_name, settings.user, holder.pid)
    deps.llm_preset(settings)  # an unknown --model is refused here, not only in the worker's log
    with Memory.from_settings(settings) as memory:
        pending = memory.pending()  # a missing database is refused here, in this process, as the foreground build refuses it
    if not pending:
        if json_out:
            print_json({"background": False, "pid": None, "log": None, "finished": True, "db": settings.store_name, "user": settings.user})
        elif not quiet:
            sys.stdout.write("nothing is pending: the memory is built\n")
        return None
    log = log_path(build_lock)
    log.parent.mkdir(parents=True, exist_ok=True)
    args = [
        sys.executable,
        "-m",
        "nemori_cli",
        "build",
        "--quiet",
        "--user",
        settings.user,
        "--window",
        str(window),
        "--neighbours",
        str(neighbours),
    ]
    for flag, value in (("--model", settings.model), ("--embedder", settings.embedder), ("--max-tokens", max_tokens)):
        if value is not None:
            args += [flag, str(value)]
    # The store goes by the environment, not the command line: a PostgreSQL URL's password stays out of `ps`.
    env = child_environment(
        {
            "NEMORI_DB": settings.store.for_child(),
            "NEMORI_PARALLEL": str(settings.parallel),
            "NEMORI_WORKERS": str(settings.workers),
            "NEMORI_CACHE_DIR": str(settings.cache_dir),
        }
    )
    with open(log, "ab") as out:
        out.write(f"\n--- nemori build started {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n".encode())
        out.flush()
        child = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env, start_new_session=True, close_fds=True)
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        holder = build_lock.holder()
        if holder is not None and holder.pid == child.pid and holder.state == "building":
            break  # the lock taken and the model loaded: what can fail at once has not
        code = child.poll()
        if code is not None:  # done already (nothing pending), or refused: its last line says why
            last = _last_line(log)
            if code != 0:
                raise _stopped_at_once(code, last)
            if not quiet:
                _say_started(json_out, child.pid, log, settings, finished=True)
            return {"pid": child.pid, "log": str(log), "finished": True}
        time.sleep(0.1)
    if not quiet:
        _say_started(json_out, child.pid, log, settings, finished=False)
    return {"pid": child.pid, "log": str(log), "finished": False}


def _say_started(json_out: bool, pid: int, log: Path, settings, *, finished: bool) -> None:
    if json_out:
        print_json(
            {"background": True, "pid": pid, "log": str(log), "finished": finished, "db": settings.store_name, "user": settings.user}
        )
        return
    if finished:
        sys.stdout.write(f"the background build finished at once (nothing was pending); log: {log}\n")
        return
    sys.stdout.write(
        f"building in the background (pid {pid}); log: {log}\n"
        "`nemori stats` shows how far it is, `nemori build --stop` stops it; `ask` answers meanwhile\n"
    )


def _stopped_at_once(code: int, last: str):
    """The worker's refusal as this command's own: its line without its "nemori: error: " (the prefix once),
    and its exit code (4 a database it cannot write, 2 a setting, ...), as docs/REFERENCE.md's table says."""
    from nemori_cli.errors import NemoriError

    reason = last.removeprefix("nemori: error: ") if code > 0 else f"killed by signal {-code}; its log ends: {last}"
    error = NemoriError(f"the background build stopped at once: {reason}")
    error.exit_code = code if code > 0 else 1
    return error


def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1] if lines else "no output"


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
