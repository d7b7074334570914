"""`nemori search` (no LLM) and `nemori ask` (retrieve, then answer)."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from enum import Enum
from typing import Annotated, Any, cast, get_type_hints

import typer

from nemori_cli.cli import options as opt
from nemori_cli.cli.help import examples
from nemori_cli.cli.question_lines import question_lines
from nemori_cli.cli.render import console, esc, hit_json, print_json, print_json_line, stamp
from nemori_cli.errors import InputError, NemoriError

SEARCH_EXAMPLES = examples(
    'nemori search "climbing gym"',
    'nemori search "when is the wedding" -n 5',
    'nemori search "bike" --json | jq ".hits[0].text"',
)
ASK_EXAMPLES = examples(
    'nemori ask "When did Priya go climbing?"',
    'nemori ask "Where does Sam live?" --as-of 2024-03-31',
    'nemori ask "How long ago did Sam move?" --today 2024-06-01 --json',
    "nemori ask --questions questions.txt --json > answers.jsonl",
)


class SearchMode(str, Enum):
    hybrid = "hybrid"
    vector = "vector"
    text = "text"


class Context(str, Enum):
    narrative = "narrative"
    messages = "messages"


def _text_arg(value: str, what: str) -> str:
    try:
        text = sys.stdin.read() if value == "-" else value
    except UnicodeDecodeError:
        raise InputError(f"{what} on stdin is not UTF-8 text") from None
    text = text.strip()
    if not text:
        raise InputError(f"empty {what}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes on the command line arrive as lone surrogates
        raise InputError(f"{what} {text[:60]!r} is not valid text (undecodable bytes?)") from None
    return text


class Profile(str, Enum):
    core = "core"
    budget = "budget"
    paper = "paper"


Opt = int | None
ProfileOpt = Annotated[
    Profile,
    typer.Option(
        "--profile",
        metavar="NAME",
        help="What the answer reads. core (ask's default): the current facts and the latest messages, the same for every "
        "question, then what budget finds; budget (search's default): facts and messages in one ranking, cut at a token "
        "budget; paper: the Nemori paper's fixed 10 episodes and 20 facts. The options below change it.",
    ),
]
K = Annotated[
    Opt,
    typer.Option("--k", "-k", min=0, max=200, metavar="N", help="Episodes to retrieve (0: none).", show_default=False),
]
Raw = Annotated[
    Opt,
    typer.Option("--raw", min=0, max=50, metavar="N", help="How many of the top episodes bring their messages.", show_default=False),
]
Facts = Annotated[
    Opt,
    typer.Option(
        "--facts",
        min=0,
        max=400,
        metavar="N",
        help="Facts to retrieve (0: none). `ask` beyond the window reads raw turns alone unless N is given.",
        show_default=False,
    ),
]
Messages = Annotated[
    Opt,
    typer.Option("--messages", min=0, max=400, metavar="N", help="Messages taken into the ranking (0: none).", show_default=False),
]
Turns = Annotated[
    Opt,
    typer.Option("--turns", min=0, max=20, metavar="N", help="Messages either side that a found message brings.", show_default=False),
]
Budget = Annotated[
    Opt,
    typer.Option(
        "--budget", min=0, max=100_000, metavar="TOKENS", help="Tokens (estimated) for all that is found; 0: no budget.", show_default=False
    ),
]
Notes = Annotated[
    int,
    typer.Option("--notes", min=0, max=200, metavar="N", help="A-MEM notes to retrieve (0: none), each with the notes it links to."),
]
Linked = Annotated[int, typer.Option("--linked", min=0, max=200, metavar="N", help="At most this many linked notes added to those found.")]
ContextOpt = Annotated[
    Context | None,
    typer.Option(
        "--context",
        metavar="WHAT",
        help="What an episode shows: its narrative, or its messages (every episode).",
        show_default=False,
    ),
]
Mode = Annotated[
    SearchMode, typer.Option("--mode", metavar="MODE", help="hybrid (meaning and words, fused), vector (meaning) or text (words).")
]
AnswerModel = Annotated[
    str | None,
    typer.Option(
        "--answer-model",
        metavar="NAME",
        help="The model that answers (env NEMORI_ANSWER_MODEL; default: models.toml's default_answer_llm, else --model).",
        show_default=False,
    ),
]


# `search` and `ask` take the same retrieval options. Typer reads a command's options from its signature, so rather than
# repeat a dozen parameters in both and pass them on one by one, they are declared once, as RetrievalArgs' fields, and
# @retrieval_options puts them in each command's signature where its `retrieval` parameter stands, then hands the
# command what was given as one RetrievalArgs.


@dataclass(frozen=True)
class RetrievalArgs:
    """The retrieval options as given on the command line (the default profile is the command's own)."""

    profile: ProfileOpt
    k: K = None
    facts: Facts = None
    raw: Raw = None
    messages: Messages = None
    turns: Turns = None
    budget: Budget = None
    notes: Notes = 10
    linked: Linked = 10
    mode: Mode = SearchMode.hybrid
    context: ContextOpt = None
    as_of: opt.AsOf = None

    def options(self):
        """The profile's settings, with the options given instead of its own; its ``as_of`` is --as-of read as a datetime."""
        moment = opt.as_of(self.as_of)  # a bad date is refused before anything loads
        from nemori_cli.retrieval.search import PROFILES

        given = dict(k=self.k, facts=self.facts, raw_for_top=self.raw, messages=self.messages, budget=self.budget, turns=self.turns)
        chosen = {name: value for name, value in given.items() if value is not None}
        if self.context is not None:
            chosen["context"] = self.context.value
            if self.context is Context.messages:
                chosen["layout"] = "grouped"  # raw blocks per episode: the paper's P variant
        if self.facts:  # facts asked for by number are read beyond the window too (SearchOptions.facts_beyond)
            chosen["facts_beyond"] = True
        return replace(PROFILES[self.profile.value], mode=self.mode.value, notes=self.notes, linked=self.linked, as_of=moment, **chosen)


def retrieval_options(profile: Profile) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Declare RetrievalArgs' options on a command, ``profile`` the default profile, and hand it them as ``retrieval``."""
    hints = get_type_hints(RetrievalArgs, include_extras=True)
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    shared = [
        inspect.Parameter(f.name, kind, annotation=hints[f.name], default=profile if f.name == "profile" else f.default)
        for f in fields(RetrievalArgs)
    ]

    def declare(command: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(command)
        def run(**given) -> None:  # typer passes every parameter by name
            command(retrieval=RetrievalArgs(**{p.name: given.pop(p.name) for p in shared}), **given)

        own = inspect.signature(command, eval_str=True).parameters.values()
        cast(Any, run).__signature__ = inspect.Signature(  # cast: mypy knows no __signature__ on a function
            [q for p in own for q in (shared if p.name == "retrieval" else [p])]
        )
        return run

    return declare


@retrieval_options(Profile.budget)
def search_cmd(
    query: Annotated[str, typer.Argument(metavar="QUERY", help="What to look for, or - for stdin.", show_default=False)],
    retrieval: RetrievalArgs,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=1000, metavar="N", help="Show at most this many hits, the best first.")
    ] = 10,
    db_path: opt.Db = None,
    user: opt.User = None,
    embedder: opt.EmbedderName = None,
    json_out: opt.Json = False,
) -> None:
    """Find memories, without any model: by meaning and by words.

    Episodes, facts and messages are ranked together, the best first. A
    hit's relevance is out of 100: 100 is first both by meaning and by
    words, 50 first by one of them only.
    """
    from nemori_cli.api import Memory

    text = _text_arg(query, "query")
    options = retrieval.options()
    moment = options.as_of
    from nemori_cli.retrieval.search import relevance

    with Memory.from_settings(opt.settings(db_path, user, None, embedder)) as memory:
        found = memory.retrieve(text, options=options)
    # The budget decides what an answer reads; a person reads the best few (the tail was unrelated turns).
    hits, ms, more = found.hits[:limit], found.ms, max(len(found.hits) - limit, 0)
    if json_out:
        print_json(
            {
                "query": text,
                "user": memory.user,
                "as_of": moment.isoformat() if moment else None,
                "hits": [{**hit_json(h), "relevance": relevance(h.score, options)} for h in hits],
                "more": more,  # hits found beyond --limit
                "tokens": {"prompt": 0, "completion": 0},  # retrieval spends no LLM tokens
                "ms": round(ms, 2),
            }
        )
        return
    out = console()
    if not hits:
        out.print("no memories found")
    for h in hits:
        score = f"relevance {relevance(h.score, options)}"
        if h.kind == "fact":
            out.print(f"[bold]F{h.id}[/bold] {h.start:%Y-%m-%d}  {score}  {esc(h.text)}", soft_wrap=True)
            continue
        if h.kind == "summary":
            out.print(f"[bold]summary[/bold] (version {h.id}): {esc(h.text)}", soft_wrap=True)
            continue
        if h.kind == "note":
            via = f"linked from N{h.linked_from}" if h.linked_from else score
            out.print(f"[bold]N{h.id}[/bold] {h.start:%Y-%m-%d}  {via}  {esc(h.text)}", soft_wrap=True)
            continue
        if h.kind == "message":
            out.print(f"[bold]M{h.id}[/bold] {stamp(h.start)}  {score}  {esc(h.title)}: {esc(h.text)}", soft_wrap=True)
            continue
        out.print(f"[bold]E{h.id}[/bold] {stamp(h.start)}  {score}  [bold]{esc(h.title)}[/bold]")
        out.print(f"   {esc(h.text)}", soft_wrap=True)
    shown = f"{len(hits)} of {len(hits) + more} hits (-n {len(hits) + more} shows all)" if more else f"{len(hits)} hits"
    out.print(f"[dim]{shown} in {ms:.1f} ms{_as_of_note(moment)}[/dim]")


# @retrieval_options fills `retrieval` in; ask_cmd gives it a default only because an optional QUESTION comes before it.
_GIVEN_BY_DECORATOR = cast(RetrievalArgs, None)
QuestionsFile = Annotated[
    str | None,
    typer.Option(
        "--questions",
        metavar="FILE",
        help="Questions one a line (- for stdin), each answered as it is read, by one loaded model; with --json, one JSON object a line.",
        show_default=False,
    ),
]


@retrieval_options(Profile.core)
def ask_cmd(
    question: Annotated[str | None, typer.Argument(metavar="QUESTION", help="The question, or - for stdin.", show_default=False)] = None,
    questions_file: QuestionsFile = None,
    retrieval: RetrievalArgs = _GIVEN_BY_DECORATOR,
    today: Annotated[
        str,
        typer.Option(
            metavar="DATE",
            help="Date to take as today for questions like 'how long ago' (default: the --as-of date, else none).",
            show_default=False,
        ),
    ] = "",
    db_path: opt.Db = None,
    user: opt.User = None,
    model: opt.Model = None,
    answer_model: AnswerModel = None,
    embedder: opt.EmbedderName = None,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--quiet",
            help="A line on stderr when loading the model takes more than a second (default: only on a terminal).",
            show_default=False,
        ),
    ] = None,
    json_out: opt.Json = False,
) -> None:
    """Answer a question from memory, citing the episodes used.

    Loads the answer model (a few seconds the first time). The options below
    --profile choose what it reads. A script with many questions gives them
    with --questions: the model loads once, not once a question.
    """
    from nemori_cli.api import Memory

    if (question is None) == (questions_file is None):
        raise InputError("give one QUESTION, or --questions FILE (one a line), not both and not neither")
    asked = question_lines(questions_file) if questions_file is not None else [_text_arg(question or "", "question")]
    options = retrieval.options()
    settings = opt.settings(db_path, user, model, embedder)
    settings.answer_model = answer_model or settings.answer_model
    from nemori_cli.cli.progress import slow_note, wanted

    with Memory.from_settings(settings) as memory:
        for number, text in enumerate(asked):
            # The note is for the first answer only: after it the model is loaded and the head state is in memory.
            with slow_note(wanted(progress) and number == 0, "loading the answer model and reading the memory (a few seconds, once)…"):
                try:
                    answer = memory.ask(text, options=options, today=today or None)
                except NemoriError as e:
                    if questions_file is not None:  # which of many stopped the run: the answers before it are out already
                        e.message = f"question {number + 1} ({text[:50]!r}): {e.message}"
                    raise
            cited_episodes = memory.cited(answer) if not json_out else []  # cited through their raw turns too
            built = memory.build_state(eta=False)  # what of the history is not built into memory yet
            _show_answer(answer, cited_episodes, built, memory, options.as_of, json_out, many=questions_file is not None)


def _show_answer(answer, cited_episodes, built, memory, moment, json_out: bool, *, many: bool) -> None:
    if answer.failed:  # on stderr in both modes: the answer on stdout already says so, this says why
        sys.stderr.write(
            f"nemori: warning: {answer.problem[:300] or 'the model gave no usable answer'}; the answer failed and is counted in `nemori stats`\n"
        )
    if json_out:
        reply = {
            "question": answer.question,
            "as_of": moment.isoformat() if moment else None,
            "answer": answer.answer,
            "abstained": answer.abstained,  # the memories do not hold the answer
            "failed": answer.failed,  # the model gave no usable answer
            "cited": list(answer.cited),
            "model": answer.model,
            "memories": [hit_json(h) for h in answer.hits],
            "tokens": {"prompt": answer.usage.prompt_tokens, "completion": answer.usage.completion_tokens},
            "ms": {"search": round(answer.search_ms, 1), "answer": round(answer.answer_ms, 1)},
            # How the core context came to be in the model: loaded (its saved state), built (read now and saved), live, none.
            "core": _core_json(memory.last_core),
            "built": built.as_json(),
            "unbuilt_memories": len(_unbuilt(answer, built)),  # of "memories", raw turns not built into memory yet
        }
        if many:
            print_json_line(reply)  # JSON Lines: a script reads each answer as it comes
        else:
            print_json(reply)
        return
    out = console()
    if many:
        out.print(f"[bold]{esc(answer.question)}[/bold]", soft_wrap=True)
    out.print(esc(answer.answer), soft_wrap=True)
    for e in cited_episodes:
        out.print(f"[dim]  E{e.id} {e.start:%Y-%m-%d}: {esc(e.title)}[/dim]")
    if not cited_episodes and not answer.abstained:  # A-MEM memory: no episodes to cite; show the notes it read first
        for h in [h for h in answer.hits if h.kind == "note"][:3]:
            out.print(f"[dim]  N{h.id} {h.start:%Y-%m-%d}: {esc(h.text)}[/dim]", soft_wrap=True)
    out.print(
        f"[dim]{len(answer.hits)} memories, {answer.usage.prompt_tokens}+{answer.usage.completion_tokens} tokens, "
        f"search {answer.search_ms:.0f} ms, answer {answer.answer_ms / 1000:.1f} s{_as_of_note(moment)}[/dim]"
    )
    note = _unbuilt_note(answer, built)
    if note:
        out.print(f"[dim]{esc(note)}[/dim]", soft_wrap=True)
    if many:
        out.print()
    sys.stdout.flush()


def _unbuilt(answer, built) -> list:
    """The answer's memories that are raw turns said since the oldest message not built yet."""
    if not built.pending or built.pending_from is None:
        return []
    from nemori_cli.domain import to_epoch

    since = to_epoch(built.pending_from)
    return [h for h in answer.hits if h.kind == "message" and to_epoch(h.start) >= since]


def _unbuilt_note(answer, built) -> str:
    """A line when the part of the history this answer needed is not built yet: it read raw turns only, without episodes or facts."""
    if not built.pending:
        return ""
    unbuilt = _unbuilt(answer, built)
    if not unbuilt and not answer.abstained:
        return ""
    read = (
        f"{len(unbuilt)} of these memories are raw turns not built into episodes and facts yet; "
        if unbuilt
        else "the memory may hold it once built: "
    )
    running = f"a build is running (pid {built.worker_pid})" if built.worker_pid else "`nemori build` builds them"
    return f"{read}{built.pending} messages said from {built.pending_from:%Y-%m-%d} on are pending; {running}"


def _core_json(prepared) -> dict | None:
    if prepared is None:
        return None
    return {"outcome": prepared.outcome, "tokens": prepared.tokens, "ms": round(prepared.ms, 1)}


def _as_of_note(moment) -> str:
    return f", memory as of {stamp(moment)}" if moment else ""
