"""Answering: retrieve, then one constrained LLM call that cites memory ids."""

from __future__ import annotations

import time

from nemori_cli.domain import Answer, Usage
from nemori_cli.embed.base import Embedder
from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.prompts import answer as prompt
from nemori_cli.retrieval.search import SearchOptions, search
from nemori_cli.store.db import Database

STAGE = "answer"


def ask(
    db: Database,
    user: str,
    embedder: Embedder,
    llm: StructuredLLM,
    question: str,
    options: SearchOptions = SearchOptions(),
    *,
    today: str | None = None,
) -> tuple[Answer, list[int]]:
    """The answer and the ids of the memories it cites (the model's choice, else the top hits)."""
    hits, search_ms = search(db, user, embedder, question, options)
    started = time.perf_counter()
    episode_hits = [h for h in hits if h.kind == "episode"]
    schema = prompt.schema_for(tuple(h.id for h in episode_hits))
    messages = prompt.render(question, hits, raw_for_top=options.raw_for_top, now=today, context=options.context)
    try:
        completion = llm.complete(messages, schema=schema, stage=STAGE, max_tokens=120)
        text = completion.value.answer.strip()
        cited = list(dict.fromkeys(completion.value.sources))
        usage = Usage(completion.prompt_tokens, completion.completion_tokens, completion.ms)
    except LLMOutputError as e:
        # No silent empty answer: say plainly that the model failed, and still show the memories.
        llm.log.fallback(STAGE, e.message)
        text = "(the model gave no usable answer; the memories below are the best matches)"
        cited = []
        last = llm.log.calls[-1] if llm.log.calls else None
        usage = Usage(last.prompt_tokens, last.completion_tokens, last.ms) if last else Usage()
    if not cited:
        cited = [h.id for h in episode_hits[:3]]
    answer_ms = (time.perf_counter() - started) * 1000
    return Answer(question, text, tuple(hits), usage, search_ms, answer_ms), cited
