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
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from nemori_cli import deps
from nemori_cli.config import DEFAULT_NEIGHBOURS, DEFAULT_WINDOW, MAX_PARALLEL, MAX_WORKERS, Settings
from nemori_cli.domain import MAX_ID, Answer, Episode, Fact, Hit, IncomingMessage, MemoryName, Note
from nemori_cli.errors import ConfigError, InputError, StoreError
from nemori_cli.importers.collect import Imported
from nemori_cli.importers.given import read_export, read_messages, shown_name
from nemori_cli.pipeline.built import BuildState
from nemori_cli.pipeline.ingest_report import IngestReport, Progress
from nemori_cli.retrieval.search import DEFAULT_PROFILE, SearchOptions
from nemori_cli.services import answer as answering
from nemori_cli.services import forget as forgetting
from nemori_cli.services import ingest as ingesting
from nemori_cli.services.answer import Retrieval
from nemori_cli.services.forget import ForgetKind
from nemori_cli.services.ingest import BuildRunning, BuildSpec, IngestResult, check_workers
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import notes as note_sql
from nemori_cli.store.forget import stored

if TYPE_CHECKING:
    from nemori_cli.retrieval.core_cache import Prepared

# The readers are the importers' (importers/given.py), and the ingest's records and checks are
# services/ingest.py's; the API offers them by these names too.
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

# The method's flags (memory/profile.py): None leaves each to the database's record or the default.
METHOD_FLAGS = ("memory", "distill", "integrate", "facts", "index", "partition")


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
            settings.parallel = ingesting.whole_number("parallel", parallel, MAX_PARALLEL)
        if workers is not None:
            settings.workers = ingesting.whole_number("workers", workers, MAX_WORKERS)
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
        # flag that disagrees with the record is refused by memory/method.resolve.
        self.method, self.window, self.neighbours = method, window, neighbours
        self._open: tuple[str, deps.Session] | None = None
        # One call at a time: the store's connection and the loaded model are one each, and SQLite's
        # connection refuses two threads in it at once. A second thread waits; for reads in parallel,
        # give each thread a Memory of its own (connections of their own).
        self._calls = threading.RLock()
        self.last_core: Prepared | None = None  # what the last `ask` did to have its core context in the model

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
        incoming, namespace = ingesting.given(messages)
        ingesting.check_budget(max_tokens)
        check_workers(self.settings)
        run = ingesting.Run(flush=flush, max_tokens=max_tokens, progress=progress, on_stored=on_stored, build=build)
        return ingesting.ingest(self._session("create"), self._spec(), incoming, namespace, run)

    def _spec(self) -> BuildSpec:
        """What this memory is built with (services/ingest.py)."""
        return BuildSpec(self.settings, self.method, self.window, self.neighbours)

    @_one_at_a_time
    def build(
        self, *, max_tokens: int | None = None, progress: Progress | None = None, stop: threading.Event | None = None
    ) -> IngestResult:
        """Make the memory of every pending message now, oldest first, with the database's recorded method.

        Resumes an interrupted ingest or build, and builds what `ingest(build=False)`
        stored. ``stop``, set from another thread (or a signal handler), ends the
        run after the unit of work in hand; the rest stays pending.
        """
        ingesting.check_budget(max_tokens)
        check_workers(self.settings)
        session = self._session("write")  # building never creates a database
        if self.pending() == 0:
            return IngestResult.of(IngestReport())
        return ingesting.build(session, self._spec(), max_tokens=max_tokens, progress=progress, stop=stop)

    @_one_at_a_time
    def flush(self, *, max_tokens: int | None = None, progress: Progress | None = None) -> IngestResult:
        """`build`, by its older name."""
        return self.build(max_tokens=max_tokens, progress=progress)

    @_one_at_a_time
    def build_state(self, *, eta: bool = True) -> BuildState:
        """How much of this memory is built: pending messages, built through when, the time the rest needs, a running build."""
        return ingesting.state(self._spec(), lambda: self._session("read"), eta=eta)

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
        if self._open is not None and "db" not in vars(self._open[1]) and not deps.store_exists(self.settings):
            return 0  # a session that may create the file has not yet: nothing is stored, and asking must not create it
        return ingesting.backlog(self._session("read"), self.user)

    @_one_at_a_time
    def forget(self, kind: ForgetKind | Literal["user"], item_id: int | None = None) -> dict[str, int]:
        """Delete one episode, fact or note for good (``forget("fact", 3)``), or everything of this user (``forget("user")``).

        Returns what was deleted, table by table. The text is scrubbed out of the file too.
        """
        args = forgetting.checked_args(kind, item_id)
        session = self._session("write")  # forgetting never creates a database
        return forgetting.forget(session, self.user, kind, args, self.path)

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
        text = answering.query_text(query, "query")
        search_options = answering.search_options(profile, options, overrides, as_of)
        return answering.retrieve(self._session("read"), self.user, text, search_options)

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
        text = answering.query_text(question, "question")
        search_options = answering.search_options(profile, options, overrides, as_of)
        asked = answering.ask(self._session("read"), self.user, text, search_options, answering.day(today))
        if asked.core_road:
            self.last_core = asked.core  # how the model came to hold the core (None: not needed, or a past moment's)
        return asked.answer

    @_one_at_a_time
    def prepare_core(self):
        """Compute the core context's KV state for the answer model now and save it (`ingest` does at its end; `ask` otherwise does on first use).

        Returns what was done (retrieval/core_cache.Prepared) and the core; ("none", None) for
        a memory that `ask` does not answer from a core (A-MEM's notes).
        """
        return answering.prepare_core(self._session("read"), self.user)

    @_one_at_a_time
    def cited(self, answer: Answer) -> list[Episode]:
        """The episodes an answer cites, in its order (those forgotten since are left out)."""
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
        db = self._session("read").db
        return episode_sql.list_all(
            db, self.user, include_superseded=include_superseded, with_messages=with_messages, limit=limit, as_of=answering.moment(as_of)
        )

    @_one_at_a_time
    def episode(self, episode_id: int) -> Episode:
        """One episode with its messages; StoreError when this user has none with that id."""
        found = None if abs(episode_id) > MAX_ID else episode_sql.get(self._session("read").db, self.user, episode_id)
        if found is None:
            raise StoreError(f"no episode {episode_id} for user {self.user}")
        return found

    @_one_at_a_time
    def facts(self, *, include_superseded: bool = False, limit: int | None = None, as_of: str | datetime | None = None) -> list[Fact]:
        """Semantic facts (superseded ones, with what replaced them, on request; with ``as_of``, those valid then)."""
        db = self._session("read").db
        return fact_sql.list_all(db, self.user, include_superseded=include_superseded, limit=limit, as_of=answering.moment(as_of))

    @_one_at_a_time
    def notes(self, *, limit: int | None = None) -> list[Note]:
        """A-MEM notes (memory modes amem and nemori+amem), with their links."""
        return note_sql.list_all(self._session("read").db, self.user, limit=limit)

    @_one_at_a_time
    def stats(self) -> dict[str, int]:
        """Rows stored for this user, table by table."""
        return stored(self._session("read").db, self.user)


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
    unknown = sorted(set(method) - set(METHOD_FLAGS))
    if unknown:
        raise ConfigError(f"unknown option {', '.join(unknown)}; the method's are {', '.join(METHOD_FLAGS)}")
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Mapping):
        raise InputError("expected a mapping of user to messages")
    memories = {
        user: Memory(path, user=user, model=model, embedder=embedder, window=window, neighbours=neighbours, workers=workers, **method)
        for user in inputs
    }
    checked = {user: ingesting.given(given, f"<messages of {user}>") for user, given in inputs.items()}
    if not memories:
        return {}
    try:
        users = {user: (functools.partial(memory._session, "create"), memory._spec()) for user, memory in memories.items()}
        return ingesting.ingest_users(users, checked, workers=workers, flush=flush)
    finally:
        for memory in memories.values():
            memory.close()
