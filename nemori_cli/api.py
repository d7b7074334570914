"""The Python API: `from nemori_cli import Memory`.

One `Memory` is one user's memory in one store: a SQLite file, or a PostgreSQL
server named by a postgresql:// URL. It is the layer the CLI and the MCP server
stand on: the same session (deps.py), the same readers, the same runner, search
and answer, so a program gets exactly what the shell gets.

    with Memory("chat.db", user="priya") as memory:
        memory.ingest([{"speaker": "Priya", "content": "I moved to Berlin", "timestamp": "2024-06-02T10:00:00"}])
        hits = memory.search("where does Priya live")
        answer = memory.ask("Where does Priya live now?")

Every failure is a NemoriError (errors.py) with one line saying what and
where; nothing is written by a call that fails on its input. Models load on
first use: `search` needs only the embedder, `ask` and `ingest` the LLM too.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

from nemori_cli import deps
from nemori_cli.config import DEFAULT_NEIGHBOURS, DEFAULT_WINDOW, Settings
from nemori_cli.domain import MAX_ID, Answer, Episode, Fact, Hit, IncomingMessage, MemoryName, Note, Usage
from nemori_cli.errors import ConfigError, InputError, NemoriError, StoreError
from nemori_cli.importers.collect import Imported
from nemori_cli.importers.given import read_export, read_messages, shown_name
from nemori_cli.pipeline.built import BuildState
from nemori_cli.pipeline.ingest_report import IngestReport, Progress
from nemori_cli.retrieval.search import DEFAULT_PROFILE, PROFILES, SearchOptions

# The readers are the importers' (importers/given.py); the API offers them by these names too.
__all__ = [
    "BuildRunning",
    "IngestResult",
    "Memory",
    "Retrieval",
    "check_workers",
    "ingest_users",
    "read_export",
    "read_messages",
    "shown_name",
]

ForgetKind = Literal["episode", "fact", "note"]

# The method's flags (memory/profile.py): None leaves each to the database's record or the default.
METHOD_FLAGS = ("memory", "distill", "integrate", "facts", "index", "partition")

# Messages given to `ingest` get this id namespace, so the ids a program
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


@dataclass(frozen=True)
class Retrieval:
    """What one search found, and how long it took (the query's embedding included)."""

    query: str
    hits: list[Hit]
    ms: float
    as_of: datetime | None


def _one_at_a_time(method: Callable[..., Any]) -> Any:
    """A Memory method that waits for the call another thread is making on the same Memory."""

    @functools.wraps(method)
    def run(self: Memory, *args: Any, **kwargs: Any) -> Any:
        with self._calls:
            return method(self, *args, **kwargs)

    return run


class Memory:
    """One user's memory in one store: a SQLite file or a PostgreSQL server.

    ``path``: the database file (created by the first `ingest`; reads of a
    missing file fail), or a postgresql:// URL (docs/POSTGRES.md).
    ``model``, ``embedder`` and ``answer_model`` name
    presets from `nemori models` (or a .gguf path for ``model``); None takes
    the environment's or the defaults, as the CLI does. ``memory`` chooses the
    method on a new database (a later choice that disagrees is refused).
    ``parallel`` generations go at once (a window's narrations decoded
    together, or requests in flight to an endpoint; NEMORI_PARALLEL, else 1).
    ``workers`` requests are kept in flight to an OpenAI-compatible endpoint
    while ingesting (windows cut and episodes narrated ahead, each episode
    still written in order; NEMORI_WORKERS, else 1); a local GGUF model takes 1.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        user: str = "default",
        model: str | None = None,
        embedder: str | None = None,
        answer_model: str | None = None,
        memory: MemoryName | None = None,
        window: int = DEFAULT_WINDOW,
        distill: Literal["prediction", "direct"] | None = None,
        integrate: bool | None = None,
        facts: bool | None = None,
        index: Literal["narrative", "messages"] | None = None,
        partition: Literal["model", "similarity"] | None = None,
        neighbours: int = DEFAULT_NEIGHBOURS,
        parallel: int | None = None,
        workers: int | None = None,
    ) -> None:
        settings = Settings.from_env(db=str(path), user=user, model=model, embedder=embedder, answer_model=answer_model)
        if parallel is not None:
            from nemori_cli.config import MAX_PARALLEL

            if isinstance(parallel, bool) or not isinstance(parallel, int) or not 1 <= parallel <= MAX_PARALLEL:
                raise ConfigError(f"parallel must be a whole number from 1 to {MAX_PARALLEL}, not {parallel!r}")
            settings.parallel = parallel
        if workers is not None:
            from nemori_cli.config import MAX_WORKERS

            if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
                raise ConfigError(f"workers must be a whole number from 1 to {MAX_WORKERS}, not {workers!r}")
            settings.workers = workers
        method = {"memory": memory, "distill": distill, "integrate": integrate, "facts": facts, "index": index, "partition": partition}
        self._setup(settings, window, method, neighbours)

    @classmethod
    def from_settings(
        cls, settings: Settings, *, window: int = DEFAULT_WINDOW, neighbours: int = DEFAULT_NEIGHBOURS, **method: Any
    ) -> Memory:
        """A Memory over settings already resolved (the CLI's: flags, then the environment, then the defaults)."""
        memory = cls.__new__(cls)
        memory._setup(settings, window, {name: method.get(name) for name in METHOD_FLAGS}, neighbours)
        return memory

    def _setup(self, settings: Settings, window: int, method: dict[str, Any], neighbours: int) -> None:
        if not 2 <= window <= 200:
            raise ConfigError(f"window must be between 2 and 200 messages, not {window}")
        if not 1 <= neighbours <= 50:
            raise ConfigError(f"neighbours must be between 1 and 50 notes, not {neighbours}")
        self.settings: Settings = settings
        # The method's flags are chosen on a new database and recorded there; a later
        # flag that disagrees with the record is refused by memory/profile.resolve.
        self.method, self.window, self.neighbours = method, window, neighbours
        self._open: tuple[str, deps.Session] | None = None
        # One call at a time: the store's connection and the loaded model are one each, and SQLite's
        # connection refuses two threads in it at once. A second thread waits; for reads in parallel,
        # give each thread a Memory of its own (connections of their own).
        self._calls = threading.RLock()
        self.last_core = None  # what the last `ask` did to have its core context in the model (retrieval/core_cache.Prepared)

    # -- plumbing ---------------------------------------------------------

    @property
    def user(self) -> str:
        return self.settings.user

    @property
    def path(self) -> Path | str:
        """The SQLite file, or the PostgreSQL store's URL without its password."""
        return self.settings.store.path

    @property
    def memory(self) -> str | None:
        """The memory mode asked for (None: the database's, or native on a new one)."""
        return self.method["memory"]

    # How much a session may do: read < write (an existing file) < create (a new file too).
    _POWER = {"read": 0, "write": 1, "create": 2}

    def _session(self, kind: Literal["read", "write", "create"]) -> deps.Session:
        """The one session of this object, reopened only when a call needs more than it may do.

        A read never creates the file (a missing one is a StoreError); a write
        or create is checked first to be able to write (a read-only file,
        another application's SQLite file) before any model loads.
        """
        if self._open is not None and self._POWER[self._open[0]] >= self._POWER[kind]:
            return self._open[1]
        self.close()
        session = deps.session(self.settings, create=kind == "create", write=kind == "write")
        self._open = (kind, session)
        return session

    @_one_at_a_time
    def close(self) -> None:
        """Close the database; models stay loaded in the process for the next Memory."""
        if self._open is not None:
            self._open[1].close()
        self._open = None

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ----------------------------------------------------------

    @_one_at_a_time
    def ingest(
        self,
        messages: Iterable[Mapping[str, Any] | IncomingMessage] | Imported,
        *,
        flush: bool = True,
        max_tokens: int | None = None,
        progress: Progress | None = None,
        on_stored: Callable[[tuple[str, ...]], None] | None = None,
        build: bool = True,
    ) -> IngestResult:
        """Store messages, then make episodes and facts of them (resumable, idempotent by message id).

        With ``build=False`` the messages are only stored and indexed, with
        no model loaded: they are searchable and answerable as raw turns at
        once, and `build` (or a later ingest) makes their memory.

        A message is a mapping with ``speaker`` (or ``role``), ``content`` (or
        ``text``), ``timestamp`` (ISO 8601 text or a datetime) and optional
        ``id`` and ``session``, exactly a line of nemori's JSON Lines; or an
        IncomingMessage. All are checked before anything is written. An
        ``Imported`` (from `read_export`: a chat export already read and
        checked) is stored under its format's id namespace, as `nemori ingest`
        stores a file. ``progress(done, total)`` is called as episodes are made;
        ``on_stored(changed_ids)`` once the messages are stored, before any
        episode is made, with the ids of those kept as stored though given
        with other text (so a caller can say so even if the run is stopped).
        """
        if isinstance(messages, Imported):
            incoming, namespace = messages.messages, messages.namespace
        else:
            incoming, namespace = read_messages(messages), API_NAMESPACE
        _check_budget(max_tokens)
        check_workers(self.settings)
        session = self._session("create")
        if not build:
            return self._store_only(session, incoming, namespace, on_stored)
        _ = session.llm  # a missing model or a dead endpoint fails here, before any write
        pipeline = self._pipeline(session)
        added = pipeline.add_messages(incoming, namespace)
        changed = self._changed(session, incoming, namespace, on_stored)
        report = self._build_rounds(session, pipeline, flush=flush, progress=progress, max_tokens=max_tokens)
        if report is None:  # another process is building this memory: it builds these too (pipeline/lock.py)
            report = IngestReport(pending=self._backlog(session), left_to_running_build=True)
        report.read, report.added, report.changed = len(incoming), added, len(changed)
        return IngestResult.of(report, changed)

    def _build_rounds(
        self,
        session: deps.Session,
        pipeline,
        *,
        flush: bool,
        progress: Progress | None,
        max_tokens: int | None,
        stop: threading.Event | None = None,
    ):
        """Build under this memory's build lock until nothing is pending; None when another process holds the lock.

        The lock is released and the pending messages looked at again, in that
        order: a message stored meanwhile by a run that found the lock held
        (and so left it to this build) is built here, or by that run if it
        takes the lock first. An unwritable cache directory builds without
        the lock (the database needs none).
        """
        build_lock = self._lock()
        total: IngestReport | None = None
        while True:
            taken = build_lock.acquire(user=self.user)
            if taken is False:
                return total  # another builder holds it: the rest is its work
            try:
                build_lock.note(user=self.user, state="building")
                left = None if max_tokens is None else max_tokens - (total.tokens_used if total else 0)
                report = pipeline.process(flush=flush, progress=progress, max_tokens=left, workers=self.settings.workers)
            finally:
                build_lock.release()
            if total is None:
                total = report
            else:
                total.add(report)
            made = report.episodes + report.merged + report.notes
            if not flush or report.stopped_by_budget or (stop is not None and stop.is_set()) or not made:
                break
            total.pending = self._backlog(session)
            if not total.pending or (max_tokens is not None and total.tokens_used >= max_tokens):
                break
        total.pending = self._backlog(session)
        return total

    def _lock(self):
        from nemori_cli.pipeline import lock

        return lock.for_settings(self.settings)

    def _backlog(self, session: deps.Session) -> int:
        from nemori_cli.memory.profile import resolve

        return resolve(session.db, {}).mode.backlog(session.db, self.user).messages

    def _store_only(self, session: deps.Session, incoming: list[IncomingMessage], namespace: str, on_stored) -> IngestResult:
        """`ingest(build=False)`: stored and indexed, searchable now; the memory is built later."""
        import time

        from nemori_cli.pipeline.intake import store_messages

        started = time.perf_counter()
        profile = self._profile(session)
        added = store_messages(session.db, self.user, profile, session.embedder, incoming, namespace)
        changed = self._changed(session, incoming, namespace, on_stored)
        pending = profile.mode.backlog(session.db, self.user).messages
        report = IngestReport(read=len(incoming), added=added, changed=len(changed), pending=pending, seconds=time.perf_counter() - started)
        return IngestResult.of(report, changed)

    def _changed(self, session: deps.Session, incoming: list[IncomingMessage], namespace: str, on_stored) -> tuple[str, ...]:
        """The ids of messages kept as stored though given with other text; said to ``on_stored`` before any episode is made."""
        from nemori_cli.store.messages import changed_keys

        changed = tuple(key.removeprefix(f"id:{namespace}") for key in changed_keys(session.db, self.user, incoming, namespace))
        if on_stored is not None:
            on_stored(changed)
        return changed

    @_one_at_a_time
    def build(
        self, *, max_tokens: int | None = None, progress: Progress | None = None, stop: threading.Event | None = None
    ) -> IngestResult:
        """Make the memory of every pending message now, oldest first, with the database's recorded method.

        Resumes an interrupted ingest or build, and builds what `ingest(build=False)`
        stored. ``stop``, set from another thread (or a signal handler), ends the
        run after the unit of work in hand; the rest stays pending.
        """
        _check_budget(max_tokens)
        check_workers(self.settings)
        session = self._session("write")  # building never creates a database
        if self.pending() == 0:
            return IngestResult.of(IngestReport())
        holder = self._lock().holder()
        if holder is not None:  # refused before the model loads
            raise BuildRunning(self.settings.store_name, self.user, holder.pid)
        _ = session.llm  # the model first, then the embedder, as ingest loads them
        pipeline = self._pipeline(session)
        if stop is not None:
            pipeline.cancel = stop
        report = self._build_rounds(session, pipeline, flush=True, progress=progress, max_tokens=max_tokens, stop=stop)
        if report is None:  # another build took the lock between the look above and this run's turn
            holder = self._lock().holder()
            raise BuildRunning(self.settings.store_name, self.user, holder.pid if holder else None)
        return IngestResult.of(report)

    @_one_at_a_time
    def flush(self, *, max_tokens: int | None = None, progress: Progress | None = None) -> IngestResult:
        """`build`, by its older name."""
        return self.build(max_tokens=max_tokens, progress=progress)

    @_one_at_a_time
    def build_state(self, *, eta: bool = True) -> BuildState:
        """How much of this memory is built: pending messages, built through when, the time the rest needs, a running build."""
        from nemori_cli.memory.profile import resolve
        from nemori_cli.pipeline import built

        holder = self._lock().holder()
        if not deps.store_exists(self.settings):
            return BuildState(0, None, None, worker_pid=holder.pid if holder else None)
        db = self._session("read").db
        profile = resolve(db, {})
        estimate = deps.build_eta(self.settings, db, window=self.window) if eta else None
        return built.state(db, self.user, profile, eta=estimate, worker_pid=holder.pid if holder else None)

    @_one_at_a_time
    def load_model(self, *, create: bool = True) -> None:
        """Load the model that builds memory now (a missing model or a dead endpoint fails here, before any write).

        ``create`` allows `ingest` to make the database file afterwards; a
        `flush` passes False. `ingest` and `flush` load it themselves when needed.
        """
        check_workers(self.settings)
        _ = self._session("create" if create else "write").llm

    @_one_at_a_time
    def pending(self) -> int:
        """Messages stored but not yet made into memory (an interrupted or budget-stopped ingest leaves some)."""
        from nemori_cli.memory.profile import resolve

        if self._open is not None and "db" not in vars(self._open[1]) and not deps.store_exists(self.settings):
            return 0  # a session that may create the file has not yet: nothing is stored, and asking must not create it
        db = self._session("read").db
        return resolve(db, {}).mode.backlog(db, self.user).messages

    def _profile(self, session: deps.Session):
        from nemori_cli.memory.profile import resolve

        return resolve(session.db, self.method, new=deps.new_memory_defaults(self.settings))

    def _pipeline(self, session: deps.Session):
        from nemori_cli.memory.amem import AmemSettings

        return session.pipeline(self._profile(session), window=self.window, notes=AmemSettings(neighbours=self.neighbours))

    @_one_at_a_time
    def forget(self, kind: ForgetKind | Literal["user"], item_id: int | None = None) -> dict[str, int]:
        """Delete one episode, fact or note for good (``forget("fact", 3)``), or everything of this user (``forget("user")``).

        Returns what was deleted, table by table. The text is scrubbed out of the file too.
        """
        from nemori_cli.errors import StoreError
        from nemori_cli.store import forget as forget_sql

        if kind == "user":
            if item_id is not None:
                raise ConfigError("forget('user') takes no id")
            args: tuple = ()
        elif kind in ("episode", "fact", "note"):
            if not isinstance(item_id, int) or isinstance(item_id, bool) or abs(item_id) > MAX_ID:
                raise ConfigError(f"forget({kind!r}) needs the {kind}'s id (an integer of at most {MAX_ID})")
            args = (item_id,)
        else:
            raise ConfigError(f"forget: {kind!r} is not one of episode, fact, note, user")
        session = self._session("write")  # forgetting never creates a database
        store = session.db
        extra = {"reembed": lambda text: session.embedder.embed_documents([text])[0]} if kind in ("episode", "note") else {}
        with store.transaction(user=self.user):  # on PostgreSQL, after this user's ingest units in flight
            counts = getattr(forget_sql, f"forget_{kind}")(store, self.user, *args, **extra)
        try:
            session.core_cache.forget(self.user)  # a saved KV state holds the forgotten text in another form
        finally:  # one that cannot be removed is said, after the file is scrubbed all the same
            scrubbed = forget_sql.make_physical(store, vacuum=kind == "user")
        if not scrubbed:
            raise StoreError(
                f"forgotten from the memory, but another process reading {self.path} keeps the old text in the file "
                "until it closes; run `nemori forget --scrub` then"
            )
        return counts

    # -- reading ----------------------------------------------------------

    @_one_at_a_time
    def search(
        self,
        query: str,
        *,
        profile: str = DEFAULT_PROFILE,
        options: SearchOptions | None = None,
        as_of: str | datetime | None = None,
        **overrides: Any,
    ) -> list[Hit]:
        """Memories for ``query``, best first, without any LLM (vector and full-text search, fused).

        ``profile`` is "core" (the default; search reads it as "budget"), "budget" or "paper"; ``options`` replaces it
        whole; keyword ``overrides`` (k=, facts=, messages=, budget=, mode=...)
        change single fields of it. ``as_of`` (a datetime, or ISO text: a date
        alone means the end of that day) reads memory as it stood then, in the
        conversation's time, as `nemori search --as-of` does.
        """
        return self.retrieve(query, profile=profile, options=options, as_of=as_of, **overrides).hits

    @_one_at_a_time
    def retrieve(
        self,
        query: str,
        *,
        profile: str = DEFAULT_PROFILE,
        options: SearchOptions | None = None,
        as_of: str | datetime | None = None,
        **overrides: Any,
    ) -> Retrieval:
        """`search`, with the time it took and the moment it read memory at."""
        from nemori_cli.retrieval.search import search

        text = _query_text(query, "query")
        search_options = self._options(profile, options, overrides, as_of)
        session = self._session("read")
        hits, ms = search(session.db, self.user, session.embedder, text, search_options)
        return Retrieval(text, hits, ms, search_options.as_of)

    @_one_at_a_time
    def ask(
        self,
        question: str,
        *,
        profile: str = DEFAULT_PROFILE,
        options: SearchOptions | None = None,
        today: str | date | None = None,
        as_of: str | datetime | None = None,
        **overrides: Any,
    ) -> Answer:
        """Answer ``question`` from memory; ``Answer.cited`` holds the episode ids it comes from.

        ``Answer.failed`` says the model gave no usable answer (the text says
        so too, and ``Answer.problem`` why); ``Answer.abstained`` that the
        memory does not hold it; ``Answer.model`` names the model that answered.
        ``as_of`` answers from memory as it stood then (see `search`), and
        that day is "today" unless ``today`` says otherwise.
        """
        from nemori_cli.memory.profile import mode_of
        from nemori_cli.prompts.answer import NOT_MENTIONED
        from nemori_cli.retrieval.answer import ask
        from nemori_cli.store import messages as message_sql
        from nemori_cli.store import telemetry

        text = _query_text(question, "question")
        search_options = self._options(profile, options, overrides, as_of)
        session = self._session("read")
        session.check_answer_model()  # an unknown preset is refused before anything loads
        _ = session.db  # then a missing database, before any endpoint is probed
        if not message_sql.any_for(session.db, self.user):
            # A user with no memory (a name given by mistake): the answer is known without a search or a
            # model, so none loads; and nothing is written, so a read leaves no trace under a made-up name.
            return Answer(text, NOT_MENTIONED, (), Usage(), 0.0, 0.0, abstained=True)
        session.check_answer_endpoint()  # only probed: a dead endpoint fails before the embedder loads
        if search_options.core and search_options.layout == "timeline" and mode_of(session.db).reads_core:
            answer, llm = self._ask_core(session, text, search_options, _day(today))
        else:
            embedder, llm = session.embedder, session.answer_llm  # in this order: a wrong embedder is named before a model loads
            answer, _cited = ask(session.db, self.user, embedder, llm, text, search_options, today=_day(today))
        problem = next((e.detail for e in reversed(llm.log.events) if e.kind == "fallback"), "") if answer.failed else ""
        if session.db.read_only:  # a file this process may only read (deps.cannot_write): the answer's cost goes uncounted
            llm.log.drain()
        else:
            with session.db.transaction():  # the answer's cost is counted in `nemori stats`
                telemetry.write(session.db, self.user, *llm.log.drain())
        return replace(answer, model=llm.model_id, problem=" ".join(problem.split()))

    def _ask_core(self, session: deps.Session, text: str, options: SearchOptions, today: str | None):
        """The default road: the cached core, then what retrieval adds beyond it (retrieval/core_answer.py).

        The embedder loads only if the core does not hold everything; one
        named by --embedder or NEMORI_EMBEDDER is still checked against the
        database first, so a wrong one is named before any model loads.
        """
        from nemori_cli.embed.base import Deferred
        from nemori_cli.retrieval import core_answer

        if session.settings.embedder:  # one asked for by name is checked against the database before any model loads
            deps.check_embedder_preset(session.settings, session.db)
        llm = session.answer_llm
        sizes = core_answer.budget_for(deps.answer_window(session.settings, llm))
        cache = session.core_cache
        prepare = None if options.as_of is not None else (lambda core: cache.prepare(llm, self.user, core))
        # A core of another moment (--as-of) is read for this answer alone: it is not saved.
        cache.last = None
        answer = core_answer.ask(
            session.db, self.user, Deferred(lambda: session.embedder), llm, text, options, sizes=sizes, today=today, prepare=prepare
        )
        self.last_core = cache.last  # how the model came to hold the core (None: not needed, or a past moment's)
        return answer, llm

    @_one_at_a_time
    def prepare_core(self):
        """Compute the core context's KV state for the answer model now and save it (`ingest` does at its end; `ask` otherwise does on first use).

        Returns what was done (retrieval/core_cache.Prepared) and the core; ("none", None) for
        a memory that `ask` does not answer from a core (A-MEM's notes).
        """
        from nemori_cli.memory.profile import mode_of
        from nemori_cli.retrieval import core_answer
        from nemori_cli.retrieval.core_cache import Prepared

        session = self._session("read")
        if not mode_of(session.db).reads_core:
            return Prepared("none"), None
        llm = session.answer_llm
        sizes = core_answer.budget_for(deps.answer_window(session.settings, llm))
        core = core_answer.build_core(session.db, self.user, llm, sizes, PROFILES["core"])
        if not core_answer.reads_core(core, sizes):  # beyond the window `ask` reads no core: nothing to prepare
            return Prepared("none"), core
        return session.core_cache.prepare(llm, self.user, core), core

    @_one_at_a_time
    def cited(self, answer: Answer) -> list[Episode]:
        """The episodes an answer cites, in its order (those forgotten since are left out)."""
        from nemori_cli.store import episodes as episode_sql

        found = episode_sql.by_ids(self._session("read").db, self.user, list(answer.cited))
        return [found[i] for i in answer.cited if i in found]

    @_one_at_a_time
    def episodes(
        self,
        *,
        include_superseded: bool = False,
        with_messages: bool = False,
        limit: int | None = None,
        as_of: str | datetime | None = None,
    ) -> list[Episode]:
        """Episodes in time order (merged-away ones too with ``include_superseded``; with ``as_of``, those that had ended by then)."""
        from nemori_cli.store import episodes as episode_sql

        db = self._session("read").db
        return episode_sql.list_all(
            db, self.user, include_superseded=include_superseded, with_messages=with_messages, limit=limit, as_of=_moment(as_of)
        )

    @_one_at_a_time
    def episode(self, episode_id: int) -> Episode:
        """One episode with its messages; StoreError when this user has none with that id."""
        from nemori_cli.store import episodes as episode_sql

        found = None if abs(episode_id) > MAX_ID else episode_sql.get(self._session("read").db, self.user, episode_id)
        if found is None:
            raise StoreError(f"no episode {episode_id} for user {self.user}")
        return found

    @_one_at_a_time
    def facts(self, *, include_superseded: bool = False, limit: int | None = None, as_of: str | datetime | None = None) -> list[Fact]:
        """Semantic facts (superseded ones, with what replaced them, on request; with ``as_of``, those valid then)."""
        from nemori_cli.store import facts as fact_sql

        db = self._session("read").db
        return fact_sql.list_all(db, self.user, include_superseded=include_superseded, limit=limit, as_of=_moment(as_of))

    @_one_at_a_time
    def notes(self, *, limit: int | None = None) -> list[Note]:
        """A-MEM notes (memory modes amem and nemori+amem), with their links."""
        from nemori_cli.store import notes as note_sql

        return note_sql.list_all(self._session("read").db, self.user, limit=limit)

    @_one_at_a_time
    def stats(self) -> dict[str, int]:
        """Rows stored for this user, table by table."""
        from nemori_cli.store.forget import stored

        return stored(self._session("read").db, self.user)

    def _options(
        self, profile: str, options: SearchOptions | None, overrides: Mapping[str, Any], as_of: str | datetime | None = None
    ) -> SearchOptions:
        if options is None:
            if profile not in PROFILES:
                raise ConfigError(f"profile {profile!r} is not one of {', '.join(PROFILES)}")
            options = PROFILES[profile]
        unknown = sorted(set(overrides) - set(SearchOptions.__dataclass_fields__))
        if unknown:
            raise ConfigError(
                f"unknown search option {', '.join(unknown)}; expected some of {', '.join(SearchOptions.__dataclass_fields__)}"
            )
        options = replace(options, **overrides)
        return replace(options, as_of=_moment(as_of)) if as_of is not None else options


class BuildRunning(NemoriError):
    """Another process is building this memory (it holds the build lock): exit 4 (the memory is in use, as a
    database locked by another writer is), with its pid."""

    exit_code = 4

    def __init__(self, store: str, user: str, pid: int | None):
        who = f"pid {pid}" if pid else "a process starting up"
        super().__init__(f"a build of {store} for user {user} is already running ({who}); `nemori build --stop` stops it")
        self.pid = pid


def ingest_users(
    path: str | Path,
    inputs: Mapping[str, Iterable[Mapping[str, Any] | IncomingMessage] | Imported],
    *,
    workers: int = 1,
    flush: bool = True,
    model: str | None = None,
    embedder: str | None = None,
    window: int = DEFAULT_WINDOW,
    neighbours: int = DEFAULT_NEIGHBOURS,
    **method: Any,
) -> dict[str, IngestResult]:
    """Several users' messages into one database, their memories made at once; one IngestResult per user.

    For each user, what ``Memory(path, user=user, workers=workers).ingest(messages)``
    does, but the users run together: each on a thread of its own, with a
    database connection of its own, its episodes written in order; their model
    calls share ``workers`` requests in flight to the endpoint (with 1, the
    users run one after another). ``inputs`` maps each user to its messages (as
    `Memory.ingest` takes them) or to an `Imported`. Every input is checked,
    and every user's messages stored, before any episode is made. When one
    user's run fails (a dead endpoint), the others stop after the episode in
    hand and the first failure is raised, naming its user: what is not done
    stays pending, and the same call resumes it.
    """
    from nemori_cli.embed.base import serialized
    from nemori_cli.pipeline.users import run_together
    from nemori_cli.store.messages import changed_keys

    unknown = sorted(set(method) - set(METHOD_FLAGS))
    if unknown:
        raise ConfigError(f"unknown option {', '.join(unknown)}; the method's are {', '.join(METHOD_FLAGS)}")
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Mapping):
        raise InputError("expected a mapping of user to messages")
    memories = {
        user: Memory(path, user=user, model=model, embedder=embedder, window=window, neighbours=neighbours, workers=workers, **method)
        for user in inputs
    }
    checked = {
        user: (given.messages, given.namespace)
        if isinstance(given, Imported)
        else (read_messages(given, f"<messages of {user}>"), API_NAMESPACE)
        for user, given in inputs.items()
    }
    if not memories:
        return {}
    runs: dict[str, tuple[Any, int, int, tuple[str, ...]]] = {}
    try:
        shared = None
        for user, memory in memories.items():  # one at a time: the file is created once, the model loaded once
            check_workers(memory.settings)
            incoming, namespace = checked[user]
            session = memory._session("create")
            _ = session.llm
            # One embedder (and one lock around it) for every user's thread; the file's embedder was checked by the first.
            shared = shared or serialized(session.embedder)
            session.embedder = shared
            pipeline = memory._pipeline(session)
            added = pipeline.add_messages(incoming, namespace)
            changed = tuple(key.removeprefix(f"id:{namespace}") for key in changed_keys(session.db, user, incoming, namespace))
            runs[user] = (pipeline, len(incoming), added, changed)
        reports = run_together({user: run[0] for user, run in runs.items()}, workers=workers, flush=flush)
    finally:
        for memory in memories.values():
            memory.close()
    results = {}
    for user, (_pipeline, read, added, changed) in runs.items():
        report = reports[user]
        report.read, report.added, report.changed = read, added, len(changed)
        results[user] = IngestResult.of(report, changed)
    return results


def check_workers(settings: Settings) -> None:
    """Refuse workers above 1 for a model that is not an endpoint, before it loads and before anything is written.

    llama.cpp decodes one request at a time in this process: threads would
    only queue on it. Its batched decoding is --parallel; llama-server serves
    several requests at once, as an endpoint.
    """
    if settings.workers > 1:
        preset = deps.llm_preset(settings)
        if preset.kind != "openai":
            raise ConfigError(
                f"{settings.workers} workers (--workers / NEMORI_WORKERS) need an OpenAI-compatible endpoint, and model {preset.name} is a local "
                "GGUF model that llama.cpp decodes one request at a time in this process: use 1 worker (--parallel N decodes a window's "
                'narrations together), or serve the model with `llama-server --parallel N` and point a preset of kind "openai" at it'
            )


def _check_budget(max_tokens: int | None) -> None:
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0):
        raise ConfigError(f"max tokens must be a positive number of tokens, not {max_tokens}")


def _query_text(value: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"empty {what}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{what} {value[:60]!r} is not valid text") from None
    return value.strip()


def _moment(value: str | datetime | None) -> datetime | None:
    """An as-of value as the CLI reads it: a datetime as is, ISO text by dates.parse_as_of (a date alone is the end of that day)."""
    from nemori_cli.dates import parse_as_of

    if value is None or isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ConfigError(f"as_of must be a datetime or ISO text, not {type(value).__name__}")
    return parse_as_of(value)


def _day(today: str | date | None) -> str | None:
    if today is None or today == "":
        return None
    return today.isoformat() if isinstance(today, date) else str(today)
