"""A question answered from memory: which road reaches the context (the cached core, or search), and the answer's cost counted.

`api.Memory.ask` and `prepare_core` stand on this, and so, through them, do
`nemori ask` and the MCP server's `ask`. The default road reads the core
context, whose KV state is cached (retrieval/core_answer.py, core_cache.py),
then what retrieval adds beyond it; the search road (retrieval/answer.py)
reads what search finds. The answer's LLM calls are written to the store's
telemetry, so `nemori stats` counts them, unless this process may only read
the file. The session (deps.Session) is the caller's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from nemori_cli.domain import Answer, Hit, Usage
from nemori_cli.errors import ConfigError, InputError
from nemori_cli.prompts.timeline import ANSWER_FORMS
from nemori_cli.prompts.timeline import ORDERS as TIMELINE_ORDERS
from nemori_cli.retrieval.search import FACTS_AS, PROFILES, SearchOptions

if TYPE_CHECKING:
    from nemori_cli.deps import Session
    from nemori_cli.retrieval.core import Core
    from nemori_cli.retrieval.core_cache import Prepared


@dataclass(frozen=True)
class Retrieval:
    """What one search found, and how long it took (the query's embedding included)."""

    query: str
    hits: list[Hit]
    ms: float
    as_of: datetime | None


@dataclass(frozen=True)
class Asked:
    """An answer, and, when it took the core road, how the model came to hold the core (None: not needed, or a past moment's)."""

    answer: Answer
    core_road: bool
    core: Prepared | None = None


def retrieve(session: Session, user: str, text: str, options: SearchOptions) -> Retrieval:
    """Search alone, without any LLM (vector and full-text search, fused): `Memory.search` and `retrieve`."""
    from nemori_cli.retrieval.search import search

    hits, ms = search(session.db, user, session.embedder, text, options)
    return Retrieval(text, hits, ms, options.as_of)


def ask(session: Session, user: str, text: str, options: SearchOptions, today: str | None) -> Asked:
    """Answer ``text`` (a checked question) from ``user``'s memory by ``options``' road, and count its cost.

    Checks come in this order, each before anything heavier: an unknown answer
    preset, a missing database, a user with no memory (answered at once, no
    model loaded, nothing written), a dead endpoint, a wrong embedder.
    """
    from nemori_cli.memory.method import mode_of
    from nemori_cli.prompts.answer import NOT_MENTIONED
    from nemori_cli.retrieval.answer import ask as search_road
    from nemori_cli.store import messages as message_sql
    from nemori_cli.store import telemetry

    session.check_answer_model()  # an unknown preset is refused before anything loads
    _ = session.db  # then a missing database, before any endpoint is probed
    if not message_sql.any_for(session.db, user):
        # A user with no memory (a name given by mistake): the answer is known without a search or a
        # model, so none loads; and nothing is written, so a read leaves no trace under a made-up name.
        return Asked(Answer(text, NOT_MENTIONED, (), Usage(), 0.0, 0.0, abstained=True), core_road=False)
    session.check_answer_endpoint()  # only probed: a dead endpoint fails before the embedder loads
    core_road = bool(options.core and options.layout == "timeline" and mode_of(session.db).reads_core)
    core = None
    if core_road:
        answer, llm, core = _core_road(session, user, text, options, today)
    else:
        embedder, llm = session.embedder, session.answer_llm  # in this order: a wrong embedder is named before a model loads
        if options.layout == "timeline":  # its prompt opens with the same instructions as the short road's: held from their file
            session.core_cache.prepare(llm, user, _head(options.timeline_order, options.answer_form))
        answer, _cited = search_road(session.db, user, embedder, llm, text, options, today=today)
    problem = next((e.detail for e in reversed(llm.log.events) if e.kind == "fallback"), "") if answer.failed else ""
    if session.db.read_only:  # a file this process may only read (deps.cannot_write): the answer's cost goes uncounted
        llm.log.drain()
    else:
        with session.db.transaction():  # the answer's cost is counted in `nemori stats`
            telemetry.write(session.db, user, *llm.log.drain())
    return Asked(replace(answer, model=llm.model_id, problem=" ".join(problem.split())), core_road, core)


def _core_road(session: Session, user: str, text: str, options: SearchOptions, today: str | None):
    """The default road: the cached core, then what retrieval adds beyond it (retrieval/core_answer.py).

    The embedder loads only if the core does not hold everything; one
    named by --embedder or NEMORI_EMBEDDER is still checked against the
    database first, so a wrong one is named before any model loads.
    """
    from nemori_cli import deps
    from nemori_cli.embed.base import Deferred
    from nemori_cli.retrieval import core_answer

    if session.settings.embedder:  # one asked for by name is checked against the database before any model loads
        deps.check_embedder_preset(session.settings, session.db)
    llm = session.answer_llm
    sizes = core_answer.budget_for(deps.answer_window(session.settings, llm))
    cache = session.core_cache
    prepare = None if options.as_of is not None else (lambda core: cache.prepare(llm, user, core))
    # A core of another moment (--as-of) is read for this answer alone: it is not saved.
    cache.last = None
    answer = core_answer.ask(
        session.db,
        user,
        Deferred(lambda: session.embedder),
        llm,
        text,
        options,
        sizes=sizes,
        today=today,
        prepare=prepare,
        to_read=_cold_core_rule(session, user, llm, prepare is not None),
        # The short road's instructions, saved like a core: a fresh process reads only its memories and question.
        # They name no moment, so a question --as-of a past one holds the same file.
        prepare_head=lambda head: cache.prepare(llm, user, head),
    )
    return answer, llm, cache.last  # how the model came to hold the core (None: not needed, or a past moment's)


def _head(order: str = "time", form: str = "answer"):
    """The instructions every timeline prompt opens with, as a prefix the core cache saves and loads (retrieval/core_cache.Head)."""
    from nemori_cli.prompts.answer import head_slot, timeline_head
    from nemori_cli.retrieval.core_cache import Head

    return Head.of(timeline_head(order, form), slot=head_slot(order, form))


def _cold_core_rule(session: Session, user: str, llm, saved: bool):
    """What holding the core would cost now, while messages wait for a build (core_answer.COLD_CORE_TOKENS); None otherwise.

    After `ingest --build later` no process has read the core, and beyond the window reading it costs the first
    answer a minute: until a build has run (it reads the core at its end), such a core is left for the short road.
    A built memory reads its core as before, once, whatever it costs (another answer model's, a deleted state).
    """
    from nemori_cli.store import messages as message_sql

    if not message_sql.count_pending(session.db, user):
        return None
    cache = session.core_cache
    return (lambda core: cache.to_read(llm, user, core)) if saved else (lambda core: core.tokens)


def prepare_core(session: Session, user: str) -> tuple[Prepared, Core | None]:
    """The core context's KV state computed for the answer model now and saved; ("none", None) for a memory `ask` reads no core of."""
    from nemori_cli import deps
    from nemori_cli.memory.method import mode_of
    from nemori_cli.retrieval import core_answer
    from nemori_cli.retrieval.core_cache import Prepared

    if not mode_of(session.db).reads_core:
        return Prepared("none"), None
    llm = session.answer_llm
    sizes = core_answer.budget_for(deps.answer_window(session.settings, llm))
    core = core_answer.build_core(session.db, user, llm, sizes, PROFILES["core"])
    if not core_answer.reads_core(core, sizes):  # beyond the window `ask` reads no core: nothing to prepare
        return Prepared("none"), core
    return session.core_cache.prepare(llm, user, core), core


def search_options(
    profile: str, options: SearchOptions | None, overrides: Mapping[str, Any], as_of: str | datetime | None = None
) -> SearchOptions:
    """The search options of a call: ``options`` whole, else the named profile's; then single fields overridden, and the moment."""
    if options is None:
        if profile not in PROFILES:
            raise ConfigError(f"profile {profile!r} is not one of {', '.join(PROFILES)}")
        options = PROFILES[profile]
    unknown = sorted(set(overrides) - set(SearchOptions.__dataclass_fields__))
    if unknown:
        raise ConfigError(f"unknown search option {', '.join(unknown)}; expected some of {', '.join(SearchOptions.__dataclass_fields__)}")
    options = replace(options, **overrides)
    if "turns" in overrides and "turns_before" not in overrides:
        # `--turns N` asks for N turns either side; the profile's own count before a found turn is for its own N.
        options = replace(options, turns_before=-1)
    if "facts" in overrides and "facts_beyond" not in overrides:
        # Facts asked for by number are read beyond the window too, where `ask` otherwise reads raw turns alone.
        options = replace(options, facts_beyond=bool(overrides["facts"]))
    for name in ("episode_heads", "facts_beyond"):  # "false" from a script is a true string: refused, not read as on
        if not isinstance(getattr(options, name), bool):
            raise ConfigError(f"search option {name}={getattr(options, name)!r} is not true or false")
    if options.facts_as not in FACTS_AS:
        raise ConfigError(f"search option facts_as={options.facts_as!r} is not one of {', '.join(FACTS_AS)}")
    if options.timeline_order not in TIMELINE_ORDERS:
        raise ConfigError(f"search option timeline_order={options.timeline_order!r} is not one of {', '.join(TIMELINE_ORDERS)}")
    if options.answer_form not in ANSWER_FORMS:
        raise ConfigError(f"search option answer_form={options.answer_form!r} is not one of {', '.join(ANSWER_FORMS)}")
    if options.answer_form != "answer" and options.timeline_order != "time":
        raise ConfigError(f"search option answer_form={options.answer_form!r} is measured with timeline_order='time' only")
    # A negative cap would drop every raw turn without a word; below -1, turns_before would quietly mean ``turns``.
    if not (isinstance(options.session_windows, int) and options.session_windows >= 0):
        raise ConfigError(f"search option session_windows={options.session_windows!r}: expected a whole number, 0 or more (0: no cap)")
    if not (isinstance(options.turns_before, int) and options.turns_before >= -1):
        raise ConfigError(f"search option turns_before={options.turns_before!r}: expected a whole number, 0 or more (-1: as many as turns)")
    vote = options.date_vote
    if isinstance(vote, bool) or not (isinstance(vote, int | float) and math.isfinite(vote) and vote >= 0):
        raise ConfigError(f"search option date_vote={options.date_vote!r}: expected a number, 0 or more (0: off)")
    return replace(options, as_of=moment(as_of)) if as_of is not None else options


def query_text(value: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"empty {what}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{what} {value[:60]!r} is not valid text") from None
    return value.strip()


def moment(value: str | datetime | None) -> datetime | None:
    """An as-of value as the CLI reads it: a datetime as is, ISO text by dates.parse_as_of (a date alone is the end of that day)."""
    from nemori_cli.dates import parse_as_of

    if value is None or isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ConfigError(f"as_of must be a datetime or ISO text, not {type(value).__name__}")
    return parse_as_of(value)


def day(today: str | date | None) -> str | None:
    if today is None or today == "":
        return None
    return today.isoformat() if isinstance(today, date) else str(today)
