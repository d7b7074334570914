"""Messages in, memory built: store them, decide when to build, and build in rounds under the memory's build lock.

`api.Memory.ingest` and `build` stand on this, and so, through them, do
`nemori ingest`, `nemori build` and the MCP server's `remember`. A session
(deps.Session) is opened by the caller, which owns it; the functions here
take it.

One build per memory (a store and a user): the build lock (pipeline/lock.py)
is taken for each round of the runner and released between rounds, so that a
message stored meanwhile by a run that found the lock held is built by this
run or by that one, never by neither.

Only light modules are imported at the top: the CLI reads AUTO_BUILD_NOW_S for
its --help, which must stay instant.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nemori_cli.config import Settings
from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import ConfigError, NemoriError
from nemori_cli.importers.collect import Imported
from nemori_cli.pipeline.ingest_report import IngestReport, Progress

if TYPE_CHECKING:
    from nemori_cli.deps import Session
    from nemori_cli.memory.profile import Profile
    from nemori_cli.pipeline.built import BuildState
    from nemori_cli.pipeline.lock import BuildLock
    from nemori_cli.pipeline.runner import Pipeline
    from nemori_cli.store.contract import Store

# `--build auto` builds in the same run when the estimated model time (the dry run's, at this database's
# rates when it has any) is at most this; more, and the messages are only stored and indexed, searchable
# at once, and `nemori build` makes their memory. Why this figure: docs/PERFORMANCE.md, section 11.
AUTO_BUILD_NOW_S = 120.0

# Messages given to `ingest` in code get this id namespace, so the ids a program
# chooses never collide with those of a file ingested from the shell.
API_NAMESPACE = "api:"


@dataclass(frozen=True)
class IngestResult:
    """What one `ingest` call did."""

    read: int  # messages given
    added: int  # new ones (a message already stored under its id is not added again)
    changed: int  # already stored under their id with other text: kept as stored
    changed_ids: tuple[str, ...]  # their ids, in input order (as the input gave them)
    episodes: int
    merged: int
    facts: int
    notes: int
    pending: int  # stored, not yet made into memory (flush=False keeps the tail pending)
    seconds: float
    report: IngestReport  # the runner's whole report (LLM calls, fallbacks, tokens)

    @classmethod
    def of(cls, report: IngestReport, changed_ids: tuple[str, ...] = ()) -> IngestResult:
        return cls(
            read=report.read,
            added=report.added,
            changed=report.changed,
            changed_ids=changed_ids,
            episodes=report.episodes,
            merged=report.merged,
            facts=report.facts,
            notes=report.notes,
            pending=report.pending,
            seconds=report.seconds,
            report=report,
        )


class BuildRunning(NemoriError):
    """Another process is building this memory (it holds the build lock): exit 4 (the memory is in use, as a
    database locked by another writer is), with its pid."""

    exit_code = 4

    def __init__(self, store: str, user: str, pid: int | None):
        who = f"pid {pid}" if pid else "a process starting up"
        super().__init__(f"a build of {store} for user {user} is already running ({who}); `nemori build --stop` stops it")
        self.pid = pid


@dataclass(frozen=True)
class BuildSpec:
    """What one memory is built with: the settings (store, user, models, workers), the method's flags
    (memory/profile.py; None leaves each to the database's record or the default), the window, A-MEM's neighbours."""

    settings: Settings
    method: Mapping[str, Any]
    window: int
    neighbours: int

    @property
    def user(self) -> str:
        return self.settings.user

    def lock(self) -> BuildLock:
        from nemori_cli.pipeline import lock

        return lock.for_settings(self.settings)

    def profile(self, session: Session) -> Profile:
        from nemori_cli import deps
        from nemori_cli.memory.method import resolve

        return resolve(session.db, dict(self.method), new=deps.new_memory_defaults(self.settings))

    def pipeline(self, session: Session) -> Pipeline:
        from nemori_cli.memory.amem import AmemSettings

        return session.pipeline(self.profile(session), window=self.window, notes=AmemSettings(neighbours=self.neighbours))


@dataclass(frozen=True)
class Run:
    """How an ingest runs: ``flush`` the tail too; stop at about ``max_tokens``; ``progress(done, total)`` as episodes are
    made; ``on_stored(changed_ids)`` once the messages are stored; ``build`` now, or only store them."""

    flush: bool = True
    max_tokens: int | None = None
    progress: Progress | None = None
    on_stored: Callable[[tuple[str, ...]], None] | None = None
    build: bool = True


def given(
    messages: Iterable[Mapping[str, Any] | IncomingMessage] | Imported, source: str = "<messages>"
) -> tuple[list[IncomingMessage], str]:
    """Messages given in code, checked by the JSON Lines reader's rules (importers/given.py), with the API's id namespace;
    an ``Imported`` (a chat export already read) as it is, with its format's."""
    from nemori_cli.importers.given import read_messages

    if isinstance(messages, Imported):
        return messages.messages, messages.namespace
    return read_messages(messages, source), API_NAMESPACE


def whole_number(name: str, value: object, most: int) -> int:
    """``parallel`` or ``workers`` as given to `Memory`, checked."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ConfigError(f"{name} must be a whole number from 1 to {most}, not {value!r}")
    return value


def check_workers(settings: Settings) -> None:
    """Refuse workers above 1 for a model that is not an endpoint, before it loads and before anything is written.

    llama.cpp decodes one request at a time in this process: threads would
    only queue on it. Its batched decoding is --parallel; llama-server serves
    several requests at once, as an endpoint.
    """
    if settings.workers > 1:
        from nemori_cli import deps

        preset = deps.llm_preset(settings)
        if preset.kind != "openai":
            raise ConfigError(
                f"{settings.workers} workers (--workers / NEMORI_WORKERS) need an OpenAI-compatible endpoint, and model {preset.name} is a local "
                "GGUF model that llama.cpp decodes one request at a time in this process: use 1 worker (--parallel N decodes a window's "
                'narrations together), or serve the model with `llama-server --parallel N` and point a preset of kind "openai" at it'
            )


def check_budget(max_tokens: int | None) -> None:
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0):
        raise ConfigError(f"max tokens must be a positive number of tokens, not {max_tokens}")


def when_to_build(build: str, *, flush: bool, spec: BuildSpec, incoming: list[IncomingMessage], namespace: str) -> str:
    """When an ingest of these messages builds: "now", "later" or "background"; "auto" made definite by the dry run's estimate.

    Without ``flush`` the episodes are made now (all but the tail). Auto is now
    when the estimated model time (services/dry_run.build_seconds, at this
    store's rates when it has any) is at most AUTO_BUILD_NOW_S, else later;
    with no estimate (an unusable store, a refused flag: a NemoriError), now,
    and the ingest itself says what is wrong, in its own words.
    """
    when = "now" if not flush else build
    if when != "auto":
        return when
    from nemori_cli import deps
    from nemori_cli.memory.method import resolve
    from nemori_cli.services.dry_run import build_seconds

    def profile_of(store: Store) -> Profile:
        return resolve(store, dict(spec.method), new=deps.new_memory_defaults(spec.settings))

    try:
        seconds = build_seconds(spec.settings, incoming, namespace, window=spec.window, profile_of=profile_of)
    except NemoriError:
        return "now"
    return "now" if seconds <= AUTO_BUILD_NOW_S else "later"


def ingest(session: Session, spec: BuildSpec, incoming: list[IncomingMessage], namespace: str, run: Run) -> IngestResult:
    """Store the messages, then (with ``run.build``) make their memory now, in rounds under the build lock.

    Without ``build`` nothing but the embedder loads. With it, the model loads
    first: a missing model or a dead endpoint fails before any write. When
    another process holds the build lock, the messages are stored and left to
    its build (``left_to_running_build``).
    """
    if not run.build:
        return store_only(session, spec, incoming, namespace, run.on_stored)
    _ = session.llm  # a missing model or a dead endpoint fails here, before any write
    pipeline = spec.pipeline(session)
    added = pipeline.add_messages(incoming, namespace)
    changed = changed_ids(session, spec.user, incoming, namespace, run.on_stored)
    report = build_rounds(session, spec, pipeline, flush=run.flush, progress=run.progress, max_tokens=run.max_tokens)
    if report is None:  # another process is building this memory: it builds these too (pipeline/lock.py)
        report = IngestReport(pending=backlog(session, spec.user), left_to_running_build=True)
    report.read, report.added, report.changed = len(incoming), added, len(changed)
    return IngestResult.of(report, changed)


def store_only(
    session: Session, spec: BuildSpec, incoming: list[IncomingMessage], namespace: str, on_stored: Callable[[tuple[str, ...]], None] | None
) -> IngestResult:
    """`ingest(build=False)`: stored and indexed, searchable now; the memory is built later."""
    import time

    from nemori_cli.memory import modes
    from nemori_cli.pipeline.intake import store_messages

    started = time.perf_counter()
    profile = spec.profile(session)
    added = store_messages(session.db, spec.user, profile, session.embedder, incoming, namespace)
    changed = changed_ids(session, spec.user, incoming, namespace, on_stored)
    pending = modes.for_profile(profile).backlog(session.db, spec.user).messages
    report = IngestReport(read=len(incoming), added=added, changed=len(changed), pending=pending, seconds=time.perf_counter() - started)
    return IngestResult.of(report, changed)


def changed_ids(
    session: Session, user: str, incoming: list[IncomingMessage], namespace: str, on_stored: Callable[[tuple[str, ...]], None] | None
) -> tuple[str, ...]:
    """The ids of messages kept as stored though given with other text; said to ``on_stored`` before any episode is made."""
    from nemori_cli.store.messages import changed_keys

    changed = tuple(key.removeprefix(f"id:{namespace}") for key in changed_keys(session.db, user, incoming, namespace))
    if on_stored is not None:
        on_stored(changed)
    return changed


def build(
    session: Session, spec: BuildSpec, *, max_tokens: int | None, progress: Progress | None, stop: threading.Event | None
) -> IngestResult:
    """Every pending message built now, oldest first; BuildRunning when another process holds the build lock.

    A running build is refused before the model loads. ``stop``, set from
    another thread (or a signal handler), ends the run after the unit of work
    in hand; the rest stays pending.
    """
    holder = spec.lock().holder()
    if holder is not None:  # refused before the model loads
        raise BuildRunning(spec.settings.store_name, spec.user, holder.pid)
    _ = session.llm  # the model first, then the embedder, as ingest loads them
    pipeline = spec.pipeline(session)
    if stop is not None:
        pipeline.cancel = stop
    report = build_rounds(session, spec, pipeline, flush=True, progress=progress, max_tokens=max_tokens, stop=stop)
    if report is None:  # another build took the lock between the look above and this run's turn
        holder = spec.lock().holder()
        raise BuildRunning(spec.settings.store_name, spec.user, holder.pid if holder else None)
    return IngestResult.of(report)


def build_rounds(
    session: Session,
    spec: BuildSpec,
    pipeline: Pipeline,
    *,
    flush: bool,
    progress: Progress | None,
    max_tokens: int | None,
    stop: threading.Event | None = None,
) -> IngestReport | None:
    """Build under this memory's build lock until nothing is pending; None when another process holds the lock.

    The lock is released and the pending messages looked at again, in that
    order: a message stored meanwhile by a run that found the lock held
    (and so left it to this build) is built here, or by that run if it
    takes the lock first. An unwritable cache directory builds without
    the lock (the database needs none).
    """
    build_lock = spec.lock()
    total: IngestReport | None = None
    while True:
        taken = build_lock.acquire(user=spec.user)
        if taken is False:
            return total  # another builder holds it: the rest is its work
        try:
            build_lock.note(user=spec.user, state="building")
            left = None if max_tokens is None else max_tokens - (total.tokens_used if total else 0)
            report = pipeline.process(flush=flush, progress=progress, max_tokens=left, workers=spec.settings.workers)
        finally:
            build_lock.release()
        if total is None:
            total = report
        else:
            total.add(report)
        made = report.episodes + report.merged + report.notes
        if not flush or report.stopped_by_budget or (stop is not None and stop.is_set()) or not made:
            break
        total.pending = backlog(session, spec.user)
        if not total.pending or (max_tokens is not None and total.tokens_used >= max_tokens):
            break
    total.pending = backlog(session, spec.user)
    return total


def backlog(session: Session, user: str) -> int:
    """Messages stored but not yet made into memory, by the method the database records."""
    from nemori_cli.memory import modes
    from nemori_cli.memory.method import resolve

    return modes.for_profile(resolve(session.db, {})).backlog(session.db, user).messages


def state(spec: BuildSpec, read: Callable[[], Session], *, eta: bool) -> BuildState:
    """How much of this memory is built; ``read()`` opens the session, and only when the store exists."""
    from nemori_cli import deps
    from nemori_cli.memory.method import resolve
    from nemori_cli.pipeline import built

    holder = spec.lock().holder()
    if not deps.store_exists(spec.settings):
        return built.BuildState(0, None, None, worker_pid=holder.pid if holder else None)
    db = read().db
    profile = resolve(db, {})
    estimate = deps.build_eta(spec.settings, db, window=spec.window) if eta else None
    return built.state(db, spec.user, profile, eta=estimate, worker_pid=holder.pid if holder else None)


def ingest_users(
    users: Mapping[str, tuple[Callable[[], Session], BuildSpec]],
    checked: Mapping[str, tuple[list[IncomingMessage], str]],
    *,
    workers: int,
    flush: bool,
) -> dict[str, IngestResult]:
    """Several users' messages stored, one user at a time, then their memories built at once (pipeline/users.py).

    ``users`` gives each user's session opener (a session that may create the
    store) and spec; ``checked`` its messages, already read, and their id
    namespace. The caller closes the sessions.
    """
    from nemori_cli.embed.base import serialized
    from nemori_cli.pipeline.users import run_together

    runs: dict[str, tuple[Any, int, int, tuple[str, ...]]] = {}
    shared = None
    for user, (open_session, spec) in users.items():  # one at a time: the file is created once, the model loaded once
        check_workers(spec.settings)
        incoming, namespace = checked[user]
        session = open_session()
        _ = session.llm
        # One embedder (and one lock around it) for every user's thread; the file's embedder was checked by the first.
        shared = shared or serialized(session.embedder)
        session.embedder = shared
        pipeline = spec.pipeline(session)
        added = pipeline.add_messages(incoming, namespace)
        changed = changed_ids(session, user, incoming, namespace, None)
        runs[user] = (pipeline, len(incoming), added, changed)
    reports = run_together({user: run[0] for user, run in runs.items()}, workers=workers, flush=flush)
    results = {}
    for user, (_pipeline, read, added, changed) in runs.items():
        report = reports[user]
        report.read, report.added, report.changed = read, added, len(changed)
        results[user] = IngestResult.of(report, changed)
    return results
