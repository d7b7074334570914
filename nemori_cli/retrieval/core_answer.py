"""`nemori ask` over the core context: the cached core, then what retrieval adds beyond it, then the question.

The road of one answer:

1. the core (retrieval/core.py) is built from the memory, and ``prepare`` makes
   the model hold its KV state (loaded from disk, or read once and saved:
   retrieval/core_cache.py);
2. a question none of whose words was ever said is "not mentioned" without
   the model, as on the budget road;
3. when the core holds everything, nothing is retrieved: a full-text look-up
   (no embedder, no vectors) only finds the best-matching turn for the date
   arithmetic; otherwise hybrid retrieval finds older turns and facts, the
   core's own are taken out, and the rest is cut at ``tail`` tokens;
4. one constrained call, then code mends a copied first-person line and a
   "when" that names the day a line was said (retrieval/answer_fixes.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from nemori_cli.dates import format_date
from nemori_cli.domain import Answer, Hit, Usage
from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.prompts import answer as answer_prompt
from nemori_cli.prompts import core as core_prompt
from nemori_cli.prompts.timeline import estimate_tokens
from nemori_cli.retrieval import answer as answer_module
from nemori_cli.retrieval import answer_fixes, budget, timecalc
from nemori_cli.retrieval import core as core_memory
from nemori_cli.retrieval.answer import ANSWER_TOKENS, FAILED, STAGE, abstains, cited_episodes, question_words
from nemori_cli.retrieval.core_cache import Head
from nemori_cli.retrieval.search import PROFILES, SearchOptions, search
from nemori_cli.store import message_index
from nemori_cli.store.contract import Store

PROMPT_MARGIN = 64  # tokens for the chat template around the prompt
QUESTION_RESERVE = 96  # the question and today's date
ARITHMETIC_RESERVE = 96  # worked-out date arithmetic and "no memory mentions ..."
# What retrieval may add beyond the core, in estimated tokens. Every token of it is
# read anew for each question (about 100 a second with `small` on 2 cores), while the
# core costs nothing after its first reading: a small tail keeps an answer near the
# speed of reading the whole chat. The bench's nemori-wide row measures 800
# (docs/ANSWERS.md has the comparison).
TAIL_TOKENS = 200


@dataclass(frozen=True)
class CoreBudget:
    core: int  # tokens for the core
    tail: int = TAIL_TOKENS  # tokens for what retrieval adds beyond it
    facts: bool = True  # the current facts open the core (False: raw turns only; the bench's ablation)
    focus: int = 3  # best-matching turns shown again before the question (0: none)
    # Words of each shown again, around the question's words; 0: whole lines, the default. Cut to 12
    # (the bench's nemori-core-cut12) they read ~70 fewer tokens per answer but scored lower on 3 of
    # 4 LoCoMo slices (docs/CORE.md).
    focus_words: int = 0
    # Where the history is longer than the core holds: "core" keeps the core (the most recent turns)
    # and adds ``tail`` tokens of retrieval; "short" gives the window to the question instead, one
    # ranking over facts, episodes and raw turns cut at ``short`` tokens, with no core at all; "lean"
    # keeps a small core (``lean`` tokens: facts, then the newest turns), cached like the full one,
    # and gives ``short`` tokens of retrieval to the question after it, on the core road's prompt.
    beyond: str = "core"
    # Estimated tokens of the short context. 450, not 800: over the tuning split's 135 questions the shorter one
    # scored level (+1.2, interval [-3.2, +5.5]) and answered in 2.9 s instead of 5.0; the confirmation split agreed
    # (-0.7 [-4.7, +3.4]; 3.3-3.5 s against 5.2-6.0). It finds less of the evidence (docs/BEYOND.md, fourth round).
    short: int = 450
    lean_tail: int = 800  # tokens of retrieval after the lean road's small core
    lean: int = 1024  # tokens of the lean road's core
    short_episodes: int = 0  # episodes (narratives with their dates) in that ranking; 0: none
    # The built memory's facts in that ranking too. Off: written by the 0.5B model, a fact takes a found turn's place
    # (conv-26 built: 28.8 with facts, 32.2 without); shown as the turn it came from instead, it pushed the
    # question's own turns out (-8.4 [-15.0, -2.2] over the tuning split's 90 questions: docs/BEYOND.md, sixth round).
    # A caller who asks for facts gets them (SearchOptions.facts_beyond).
    short_facts: bool = False


# What `ask` does where the history is longer than the core holds (CoreBudget.beyond): the short road, for a built
# memory as for an unbuilt one. Over built whole conversations it scored level with the core road (tuning split
# -0.9 [-6.4, +4.8]; confirmation split +4.1 [-0.8, +9.5]: docs/BEYOND.md, sixth round) in half the time (2.5-2.8 s
# against 5.6-6.1 s).
# The core road still leads on conv-26, where it was designed; the bench's nemori-core-road row keeps measuring it.
BEYOND = "short"
# On the core road (beyond="core": the bench's nemori-core-road and its ablations; `ask`'s road beyond the window until
# the sixth round), a core whose KV state would cost more than this many tokens to read before the answer (none
# saved yet: after `ingest --build later`) is not read for one question: the short road answers it (~450 tokens
# chosen for the question, no core). Reading a ~6,000-token core took 40-76 s with `small` on 2 cores; the short
# road answers in about 3.5 s (5 s at its earlier ~800 tokens), and scored level with the core road over the tuning split's 135 questions (+0.9,
# interval [-4.0, +5.9]; on the confirmation haystack +4.1 [-3.0, +11.7]: docs/BEYOND.md). The caller decides when the rule applies (services/answer.py: while
# messages wait for a build).
COLD_CORE_TOKENS = 1024


def budget_for(context_window: int, tail: int = TAIL_TOKENS, beyond: str | None = None) -> CoreBudget:
    """Everything the window holds that the answer, the question and the tail do not need goes to the core."""
    free = context_window - ANSWER_TOKENS - PROMPT_MARGIN - QUESTION_RESERVE - ARITHMETIC_RESERVE - tail
    return CoreBudget(max(256, free), tail, beyond=beyond or BEYOND)


def beyond_tail(core: core_memory.Core, sizes: CoreBudget) -> int:
    """Tokens of retrieval after this core: the lean road's core is small, and the question gets ``short``."""
    return sizes.lean_tail if sizes.beyond == "lean" and not core.holds_everything else sizes.tail


def reads_core(core: core_memory.Core, sizes: CoreBudget) -> bool:
    """Does an answer read this core? Not on the short road beyond the window: its KV state need not be made."""
    return sizes.beyond != "short" or core.holds_everything


Prepare = Callable[[core_memory.Core], None]
PrepareHead = Callable[[Head], object]  # hold a prompt's fixed head (the short road's instructions), from its file or read and saved
ToRead = Callable[[core_memory.Core], "int | None"]  # tokens the model would read now to hold a core (None: unknown)


def build_core(db: Store, user: str, llm: StructuredLLM, sizes: CoreBudget, options: SearchOptions) -> core_memory.Core:
    """The core an answer reads, as this answer model counts it (an endpoint without a tokenizer: the estimate).

    On the lean road, beyond the window, that is the small core of ``sizes.lean`` tokens.
    """
    count = getattr(llm.backend, "count_tokens", None) or estimate_tokens
    core = core_memory.build(db, user, sizes.core, count=count, as_of=options.as_of, facts=sizes.facts)
    if sizes.beyond == "lean" and not core.holds_everything:
        core = core_memory.build(db, user, sizes.lean, count=count, as_of=options.as_of, facts=sizes.facts)
    return core


def ask(
    db: Store,
    user: str,
    embedder,
    llm: StructuredLLM,
    question: str,
    options: SearchOptions = PROFILES["budget"],
    *,
    sizes: CoreBudget,
    today: str | None = None,
    prepare: Prepare | None = None,
    core: core_memory.Core | None = None,
    to_read: ToRead | None = None,
    prepare_head: PrepareHead | None = None,
) -> Answer:
    """One answer from the core and what lies beyond it; ``embedder`` is touched only when the core does not hold everything.

    ``to_read`` says what holding the core would cost now: beyond the window, a core costlier than
    COLD_CORE_TOKENS is not read for this question, the short road answers it.
    """
    if options.as_of is not None and not today:
        today = format_date(options.as_of.date())
    started = time.perf_counter()
    core = core or build_core(db, user, llm, sizes, options)
    if not reads_core(core, sizes):
        return _short(db, user, embedder, llm, question, options, sizes, today, started, prepare_head)
    if not core.holds_everything and to_read is not None and (cost := to_read(core) or 0) > COLD_CORE_TOKENS:
        llm.log.decision(
            STAGE, f"the core's state is not saved ({cost} tokens to read): answered on the short road; `nemori build` reads it"
        )
        return _short(db, user, embedder, llm, question, options, sizes, today, started, prepare_head)
    words = question_words(question)
    # A file from before the message index cannot say a word was never said (its full-text index is empty).
    indexed = not message_index.unindexed(db, user, limit=1)
    missing = message_index.unmentioned(db, user, words, as_of=options.as_of) if words and indexed else []
    ranked, tail, events = _retrieve(db, user, embedder, question, options, core, sizes)
    search_ms = (time.perf_counter() - started) * 1000
    shown = (*core.facts, *core.turns, *tail)
    if words and len(missing) == len(words):
        # Not one of the question's own words was ever said: the code answers, as on the budget road.
        llm.log.decision(STAGE, f"no message mentions {', '.join(missing)}: answered 'not mentioned' without the model")
        return Answer(question, answer_prompt.NOT_MENTIONED, shown, Usage(), search_ms, 0.0, abstained=True)
    if prepare is not None:
        prepare(core)
    begun = time.perf_counter()
    seen = [*core.turns, *tail]
    arithmetic = timecalc.between_hint(question, ranked + tail, events) or timecalc.notes(
        question, sorted({h.start.date() for h in seen}), timecalc.parse_day(today)
    )
    arithmetic = timecalc.when_hint(question, ranked) + arithmetic
    if missing:
        arithmetic.append("No memory mentions " + ", ".join(f'"{w}"' for w in missing) + ".")
    messages = core_prompt.render(
        core.text,
        question,
        tail,
        now=today,
        arithmetic=arithmetic,
        focus=ranked[: sizes.focus],
        wanted=frozenset(_stems(question)),
        focus_words=sizes.focus_words,
    )
    failed = False
    try:
        completion = llm.complete(messages, schema=answer_prompt.timeline_schema(timecalc.asks_duration(question)), stage=STAGE)
        text = answer_prompt.tidy(completion.value.answer)
        usage = Usage(completion.prompt_tokens, completion.completion_tokens, completion.ms)
    except LLMOutputError as e:
        llm.log.fallback(STAGE, e.message)
        text, failed = FAILED, True
        last = llm.log.calls[-1] if llm.log.calls else None
        usage = Usage(last.prompt_tokens // max(1, last.attempts), last.completion_tokens, last.ms) if last else Usage()
    if not failed:
        lines = [m for h in seen for m in h.messages]
        fixed = answer_fixes.uncopied(text, lines)
        fixed = answer_fixes.resolved_phrase(answer_fixes.event_day(fixed, question, ranked), question, ranked)
        if fixed != text:
            llm.log.repaired(STAGE, f"answer {text[:80]!r} said as {fixed[:80]!r}")
            text = fixed
    answer_ms = (time.perf_counter() - begun) * 1000
    cited = tuple(cited_episodes(text, [*ranked, *tail]))
    return Answer(question, text, shown, usage, search_ms, answer_ms, cited=cited, failed=failed, abstained=not failed and abstains(text))


def _short(
    db: Store,
    user: str,
    embedder,
    llm: StructuredLLM,
    question: str,
    options: SearchOptions,
    sizes: CoreBudget,
    today,
    started: float,
    prepare_head: PrepareHead | None = None,
) -> Answer:
    """Beyond the window, the question's own short context (retrieval/answer.ask's road), then the same code mends.

    A 0.5B model given 7k tokens of recent chat copies a line of it; given
    ~450-800 tokens chosen for the question it answers (docs/BEYOND.md). The
    core's KV state is not needed; only the prompt's head (its instructions)
    is held, from its file in a fresh process.
    """
    if prepare_head is not None:
        order, form = options.timeline_order, options.answer_form
        prepare_head(Head.of(answer_prompt.timeline_head(order, form), slot=answer_prompt.head_slot(order, form)))
    facts = options.facts if sizes.short_facts or options.facts_beyond else 0
    short = replace(options, core=False, budget=sizes.short, k=sizes.short_episodes, layout="timeline", facts=facts)
    answer, _cited = answer_module.ask(db, user, embedder, llm, question, short, today=today)
    if answer.failed or answer.abstained:
        return replace(answer, search_ms=answer.search_ms or (time.perf_counter() - started) * 1000)
    lines = [m for h in answer.hits for m in h.messages]
    ranked = best_turns(question, [h for h in answer.hits if h.kind == "message"], ())
    fixed = answer_fixes.uncopied(answer.answer, lines)
    fixed = answer_fixes.resolved_phrase(answer_fixes.event_day(fixed, question, ranked), question, ranked)
    if fixed != answer.answer:
        llm.log.repaired(STAGE, f"answer {answer.answer[:80]!r} said as {fixed[:80]!r}")
        answer = replace(answer, answer=fixed, abstained=abstains(fixed))
    return answer


def _stems(text: str) -> set[str]:
    return {w[: core_prompt.STEM] for w in question_words(text)}


def best_turns(question: str, searched: list[Hit], turns: tuple[Hit, ...]) -> list[Hit]:
    """Turns, best match first: the most of the question's words (speaker included), then the search's own order, then the newest.

    A search's ranking alone puts short lines first ("Nice! Which gym?" for a
    question about a climbing gym): BM25 favours them. Counting the question's
    words in each turn, with the speaker's name, puts the line that says it
    first. Each turn comes once, as its own line (no neighbours).
    """
    wanted = _stems(question)
    order: dict[int, int] = {}
    candidates: dict[int, Hit] = {}
    for position, hit in enumerate(searched):
        turn = next((m for m in hit.messages if m.id == hit.id), None)
        if turn is not None and turn.id not in candidates:
            order[turn.id] = position
            candidates[turn.id] = replace(hit, messages=(turn,))
    for hit in turns:
        candidates.setdefault(hit.id, hit)
    scored = []
    for turn_id, hit in candidates.items():
        turn = hit.messages[0]
        overlap = len(wanted & _stems(f"{turn.speaker} {turn.content}"))
        if overlap or turn_id in order:
            scored.append(((-overlap, order.get(turn_id, len(order)), -turn.timestamp.timestamp(), -turn_id), hit))
    return [hit for _key, hit in sorted(scored, key=lambda pair: pair[0])]


def _retrieve(
    db: Store, user: str, embedder, question: str, options: SearchOptions, core: core_memory.Core, sizes: CoreBudget
) -> tuple[list[Hit], list[Hit], dict[str, list[Hit]] | None]:
    """The turns that best match the question (core or not, best first), what the core lacks, and each named event's turns."""
    # When the core holds everything, full text alone finds the best turn for the date arithmetic: no embedder loads.
    mode = "text" if core.holds_everything else options.mode
    wide = replace(options, mode=mode, budget=0, k=options.k if not core.holds_everything else 0)
    found, _ms = search(db, user, embedder, question, wide)
    ranked = best_turns(question, [h for h in found if h.kind == "message"], core.turns)
    tail = [] if core.holds_everything else budget.select(core_memory.outside(core, found), beyond_tail(core, sizes))
    events = None
    if named := timecalc.two_events(question):
        alone = replace(options, mode=mode, k=0, facts=0, notes=0, messages=10, turns=0, budget=0)
        events = {event: [h for h in search(db, user, embedder, event, alone)[0] if h.kind == "message"] for event in named}
    return ranked, tail, events
