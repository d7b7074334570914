"""`nemori build --background` (and `ingest --build background`): the build started detached, and seen to take the lock and load its model.

The worker is the same `nemori build` command in a session of its own, its
output in a log file in nemori's cache directory beside the build lock
(pipeline/lock.py).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from nemori_cli.cli.render import print_json

# How long `--background` waits to see its worker take the lock and load its model (so a model that
# cannot load is one line here, not only in the log).
START_WAIT_S = 120.0


def log_path(build_lock) -> Path:
    return build_lock.path.with_suffix(".log")


def start_background(build_lock, settings, json_out: bool, *, quiet: bool = False, max_tokens, neighbours: int, window: int) -> dict | None:
    """Start `nemori build` detached (its own session, so the terminal's Ctrl-C and hang-up do not reach it) and see it load its model and take the lock.

    Returns the worker's pid and log (None when nothing was pending).
    """
    from nemori_cli import deps
    from nemori_cli.api import Memory
    from nemori_cli.config import child_environment
    from nemori_cli.services.ingest import BuildRunning

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
