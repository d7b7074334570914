"""Answering: retrieve, then one constrained LLM call; the one road every answer takes.

`nemori ask`, the doctor's probe and every benchmark system (the baselines
included, with contexts of their own) answer through ``answer_hits``: the
same prompt choice, schema, call, logging, failure handling and abstention.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from nemori_cli import stages
from nemori_cli.dates import format_date
from nemori_cli.domain import Answer, Hit, Usage
from nemori_cli.embed.base import Embedder
from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.prompts import answer as prompt
from nemori_cli.prompts import timeline
from nemori_cli.retrieval import timecalc
from nemori_cli.retrieval.search import PROFILES, SearchOptions, search
from nemori_cli.store import episodes as episodes_store
from nemori_cli.store import message_index
from nemori_cli.store.contract import Store

STAGE = stages.ANSWER
ANSWER_TOKENS = STAGE.max_tokens  # what an answer may spend
FAILED = "(the model gave no usable answer; the memories below are the best matches)"
# Below this cosine similarity, with no full-text match either, nothing
# retrieved is about the question: the answer is "not mentioned" without a
# model call (MiniLM puts unrelated sentences at about 0.0-0.2).
UNRELATED_SIMILARITY = 0.2

# What a model says when the memories do not hold the answer.
_ABSTAINS = re.compile(
    r"\b(not mentioned|do not know|don't know|no information|not (?:known|available|provided|specified|stated|say)"
    r"|(?:cannot|can't|can not) (?:be )?(?:answer|determin|tell)\w*|unknown)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Layout:
    """How retrieved memories are shown to the model."""

    name: str = "timeline"  # timeline | grouped (the paper's: episodes, then facts) | messages (raw blocks)
    raw_for_top: int = 0  # grouped: top episodes that bring their raw messages
    message_limit: int = 200  # grouped/messages: characters per raw message
    order: str = "time"  # timeline: "time" or "best-last" (SearchOptions.timeline_order)
    form: str = "answer"  # timeline: how the reader is asked (SearchOptions.answer_form)


def layout_of(options: SearchOptions) -> Layout:
    if options.layout == "timeline":
        return Layout("timeline", order=options.timeline_order, form=options.answer_form)
    return Layout("messages" if options.context == "messages" else "grouped", options.raw_for_top)


_WORD = re.compile(r"[A-Za-z]{4,}")
# Words a question is made of, whatever it asks about: not evidence that anything is missing.
_QUESTION_WORDS = frozenset(
    [
        "what",
        "when",
        "where",
        "which",
        "whom",
        "whose",
        "does",
        "have",
        "been",
        "were",
        "will",
        "would",
        "could",
        "should",
        "about",
        "with",
        "from",
        "that",
        "this",
        "their",
        "there",
        "they",
        "them",
        "many",
        "much",
        "long",
        "ago",
        "before",
        "after",
        "since",
        "first",
        "last",
        "time",
        "date",
        "year",
        "years",
        "month",
        "months",
        "week",
        "weeks",
        "days",
        "name",
        "kind",
        "type",
        "like",
        "likely",
        "most",
        "recently",
        "ever",
        "recent",
        "still",
        "think",
        "thinks",
        "feel",
        "feels",
        "make",
        "made",
        "take",
        "took",
        "give",
        "gave",
        "said",
        "tell",
        "told",
        "know",
        "mention",
        "mentioned",
        "remember",
        "talk",
        "talked",
        "discuss",
        "discussed",
        "plan",
        "plans",
        "planning",
        "going",
        "doing",
        "done",
        "start",
        "started",
        "also",
        "other",
        "some",
        "every",
        "each",
        "into",
        "over",
        "your",
        "mine",
        "passed",
        "happened",
        "happen",
        "spent",
        "spend",
        "cost",
        "costs",
        "take",
        "took",
        "total",
        "currently",
        "current",
        "days",
    ]
)


def question_words(question: str) -> list[str]:
    """The content words of a question (four letters or more), each once."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(question) if w.lower() not in _QUESTION_WORDS))


def abstains(text: str) -> bool:
    return bool(_ABSTAINS.search(text))


def unsupported(hits: list[Hit]) -> bool:
    """Nothing retrieved, or nothing retrieved that is about the question."""
    if not hits:
        return True
    if any(h.text_rank is not None for h in hits):
        return False
    best = max((h.similarity for h in hits if h.similarity is not None), default=None)
    return best is not None and best < UNRELATED_SIMILARITY


def answer_hits(
    llm: StructuredLLM,
    question: str,
    hits: list[Hit],
    layout: Layout = Layout(),
    *,
    today: str | None = None,
    gate: bool = True,
    unmentioned: Sequence[str] = (),
    events: dict[str, list[Hit]] | None = None,
    heads: Mapping[int, str] | None = None,
) -> Answer:
    """One answer from these memories (search time is the caller's to fill in).

    With ``gate``, a question nothing retrieved is about gets NOT_MENTIONED at
    once; the baselines, which always see their context, pass gate=False.
    ``heads`` (episode id: title): the timeline names each raw turn's episode in its day's heading.
    """
    started = time.perf_counter()
    if gate and unsupported(hits):
        llm.log.decision(STAGE, "nothing retrieved is about the question: answered 'not mentioned' without the model")
        return Answer(question, prompt.NOT_MENTIONED, tuple(hits), Usage(), 0.0, (time.perf_counter() - started) * 1000, abstained=True)
    episode_ids = tuple(h.id for h in hits if h.kind == "episode")
    if layout.name == "timeline":
        arithmetic = timecalc.between_hint(question, hits, events) or timecalc.notes(
            question, timeline.days_shown(hits), timecalc.parse_day(today)
        )
        arithmetic = timecalc.when_hint(question, hits) + arithmetic
        if unmentioned:
            arithmetic.append("No memory mentions " + ", ".join(f'"{w}"' for w in unmentioned) + ".")
        messages = prompt.render_timeline(
            question, hits, now=today, arithmetic=arithmetic, order=layout.order, form=layout.form, heads=heads
        )
        schema = prompt.timeline_schema(timecalc.asks_duration(question), layout.form)
    else:
        context = "messages" if layout.name == "messages" else "narrative"
        messages = prompt.render(
            question, hits, raw_for_top=layout.raw_for_top, now=today, context=context, message_limit=layout.message_limit
        )
        schema = prompt.schema_for(episode_ids)
    failed = False
    try:
        completion = llm.complete(messages, schema=schema, stage=STAGE)
        text = prompt.tidy(completion.value.answer) if layout.name == "timeline" else completion.value.answer.strip()
        cited = list(dict.fromkeys(getattr(completion.value, "sources", [])))
        usage = Usage(completion.prompt_tokens, completion.completion_tokens, completion.ms)
    except LLMOutputError as e:
        # No silent empty answer: say plainly that the model failed, and still show the memories.
        llm.log.fallback(STAGE, e.message)
        text, cited, failed = FAILED, [], True
        last = llm.log.calls[-1] if llm.log.calls else None
        usage = Usage(last.prompt_tokens // max(1, last.attempts), last.completion_tokens, last.ms) if last else Usage()
    if not cited:
        cited = cited_episodes(text, hits)
    answer_ms = (time.perf_counter() - started) * 1000
    return Answer(
        question, text, tuple(hits), usage, 0.0, answer_ms, cited=tuple(cited), failed=failed, abstained=not failed and abstains(text)
    )


def cited_episodes(text: str, hits: list[Hit]) -> list[int]:
    """The episodes behind the answer: those whose memories share the most words with it, best-ranked first.

    Chosen by code, not by the model: a 0.5B model's citations were often
    any id on the page, and writing them costs output tokens.
    """
    words = set(re.findall(r"\w+", text.lower())) - {"the", "a", "an", "and", "of", "in", "on", "to", "with"}
    scored: dict[int, float] = {}
    for rank, h in enumerate(hits):
        episode = h.id if h.kind == "episode" else next((m.episode_id for m in h.messages if m.episode_id), None)
        if episode is None:
            continue
        said = set(re.findall(r"\w+", " ".join([h.text, *(m.content for m in h.messages)]).lower()))
        overlap = len(words & said)
        scored[episode] = max(scored.get(episode, 0.0), overlap - rank * 1e-3)
    ordered = sorted(scored, key=lambda e: -scored[e])
    return ordered[:3]


def episode_titles(db: Store, user: str, hits: list[Hit]) -> dict[int, str]:
    """The titles of the episodes the shown raw turns belong to (SearchOptions.episode_heads), as the memory stands now.

    With ``as_of``, none: an episode is written after its turns were said, and the store cannot say whether this one
    existed at that moment, so the timeline keeps its bare dates rather than name what may come later.
    """
    ids = sorted({m.episode_id for h in hits if h.kind == "message" for m in h.messages if m.episode_id is not None})
    return {i: e.title for i, e in episodes_store.by_ids(db, user, ids).items() if e.title.strip()}


def ask(
    db: Store,
    user: str,
    embedder: Embedder,
    llm: StructuredLLM,
    question: str,
    options: SearchOptions = PROFILES["budget"],
    *,
    today: str | None = None,
) -> tuple[Answer, list[int]]:
    """Retrieve and answer; returns the answer and the ids of the episodes it cites.

    With ``options.as_of`` the memories are those of that moment, and unless
    ``today`` is given, that day is "today" for the model: "how long ago" is
    asked from then, not from whenever the question is run.
    """
    if options.as_of is not None and not today:
        today = format_date(options.as_of.date())
    # A database from before the message index (not ingested since) has no raw turns to search
    # and cannot say a word was never said: it is read by its episodes instead, with no word cue.
    indexed = not message_index.unindexed(db, user, limit=1)
    if not indexed and options.messages and not options.k:
        options = replace(options, k=10)
    hits, search_ms = search(db, user, embedder, question, options)
    words = question_words(question)
    missing = message_index.unmentioned(db, user, words, as_of=options.as_of) if indexed and options.layout == "timeline" else []
    if words and len(missing) == len(words):
        # Not one of the question's own words was ever said ("my hamster" in a chat about a cat):
        # whatever the vectors found is about something else. A 0.5B model told so still
        # answered "Hamster"; the code answers instead.
        llm.log.decision(STAGE, f"no message mentions {', '.join(missing)}: answered 'not mentioned' without the model")
        return replace(answer_hits(llm, question, [], layout_of(options), today=today), search_ms=search_ms, hits=tuple(hits)), []
    events = None
    if options.layout == "timeline" and (named := timecalc.two_events(question)):
        # Each event of a "between A and B" question looked up on its own, among the raw turns.
        alone = replace(options, k=0, facts=0, notes=0, messages=10, turns=0, budget=0)
        events = {event: [h for h in search(db, user, embedder, event, alone)[0] if h.kind == "message"] for event in named}
    heads = episode_titles(db, user, hits) if options.episode_heads and options.layout == "timeline" and options.as_of is None else None
    answer = answer_hits(llm, question, hits, layout_of(options), today=today, unmentioned=missing, events=events, heads=heads)
    answer = replace(answer, search_ms=search_ms)
    return answer, list(answer.cited)
