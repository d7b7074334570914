"""Hybrid search over episodes, facts, notes and raw messages: vector (cosine) and full text (BM25), fused by RRF.

Reciprocal rank fusion needs no score calibration between the two lists:
each hit scores sum(1 / (RRF_K + rank)) over the lists that found it.
Everything is filtered by user inside the indexes themselves (the vec0
partition key, the FTS user column), so one user's memories never surface
for another. A point-in-time search (``as_of``) is filtered the same way,
inside each index query (store/asof.py says what counts at a moment), so the
top k are k memories of that moment, not what survives of k.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from nemori_cli.domain import Episode, Hit, to_epoch
from nemori_cli.embed.base import Embedder
from nemori_cli.memory.method import mode_of
from nemori_cli.memory.mode import MemoryMode
from nemori_cli.memory.profile import turn_vectors
from nemori_cli.retrieval import anchors, budget, fact_turns, question_dates
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import message_index
from nemori_cli.store import messages as message_sql
from nemori_cli.store import notes as note_sql
from nemori_cli.store.contract import Store

RRF_K = 60


@dataclass(frozen=True)
class SearchOptions:
    k: int = 10  # episodes returned
    facts: int = 20  # facts returned (the paper's m = 2k); 0 for none
    candidates: int = 50  # taken from each index before fusion
    raw_for_top: int = 2  # attach raw messages to this many top hits (the paper's r)
    mode: str = "hybrid"  # hybrid | vector | text
    # What an episode brings to the answer: its narrative (the paper's N), or
    # its raw messages for every episode retrieved (the P variant).
    context: str = "narrative"
    notes: int = 10  # A-MEM notes returned (k), when the memory has any; 0 for none
    linked: int = 10  # at most this many notes linked to those added after them
    messages: int = 0  # raw messages taken into the ranking (their own index); 0 for none
    turns: int = 1  # turns either side of a retrieved message, from its session
    # Turns before a retrieved message instead, when 0 or more (-1: ``turns``): a reply comes after its question. One
    # before and two after scored +1.1 and +0.8 on the tuning and confirmation splits, neither interval above 0, so
    # the default stays -1 (docs/BEYOND.md, eighth round).
    turns_before: int = -1
    # Tokens (estimated, see retrieval/budget.py) for everything retrieved:
    # one ranking over all kinds, cut where the budget ends. 0: no budget,
    # k/m/r decide alone (the paper's setting).
    budget: int = 0
    layout: str = "grouped"  # how the answer prompt lays it out: grouped by kind (the paper's) | timeline
    text_weight: float = 1.0  # the full-text list's weight in the fusion (the vector list's is 1)
    # Memory as it stood at this moment of the conversation (store/asof.py); None: as it stands now.
    as_of: datetime | None = None
    # `ask` answers from the core context (retrieval/core.py) and retrieves only what it lacks; `search` ignores it.
    core: bool = False
    # How a fact enters the ranking: "text", itself; "turn", the raw turn it was distilled from, with its neighbours
    # (retrieval/fact_turns.py), so the fact chooses what is shown and the reader sees what was said; "rank", not shown:
    # the turns the facts point at are a third list in the raw turns' fusion, so facts only vote for turns.
    facts_as: str = "text"
    # `ask` beyond the window (retrieval/core_answer.py's short road): the ``facts`` best facts in the question's
    # ranking too. Off: raw turns alone, what scored best with the 0.5B reader (docs/BEYOND.md, sixth round). Asking
    # for a number of facts (`ask --facts N`, `Memory.ask(facts=N)`) turns it on (services/answer.search_options).
    facts_beyond: bool = False
    # A raw turn found by meaning alone anchors a window only with this many words of substance or a word of the
    # question's (retrieval/anchors.py); 0: every turn found may (the default: 4 was rejected, docs/BEYOND.md).
    anchor_words: int = 0
    # How the timeline orders what it shows (prompts/timeline.py): "time", one timeline oldest first (shipped);
    # "best-last", one block a retrieved memory in the ranking's order reversed, so the best is read last, nearest the
    # question. Rejected on the short road: +3.1 where tuned, -0.0 [-2.7, +2.6] where confirmed (docs/BEYOND.md,
    # eighth round); the 0.5B reader's answers move with the order both ways.
    timeline_order: str = "time"
    # At most this many raw-turn windows from one chat session in the budget (retrieval/budget.select); 0: no cap.
    # Screened with no model: one a session found no more evidence (55.8% against 55.5%), so it was not benched.
    session_windows: int = 0
    # The weight of a fourth list in the raw turns' fusion: the turns said around the days the question names ("on 3
    # June, 2023", "in December"), ranked by meaning (retrieval/question_dates.py); 0: off, and no date is read.
    date_vote: float = 0.0
    # How the short road asks its reader (prompts/timeline.ANSWER_FORMS): "answer", the answer alone (shipped); "quote",
    # the words that answer copied first, then the answer; "question-first", the question before the memories too.
    # Read by every timeline prompt but the core road's (which answers where the history fits); both others were
    # rejected at tuning (docs/BEYOND.md, tenth round).
    answer_form: str = "answer"
    # A timeline names, in each day's heading, the episode its raw turns belong to (the build's title over the exact
    # lines: prompts/timeline.render's ``heads``); off: the date alone. Nothing changes before the build. Measured on
    # the short road by the bench's nemori-s450-heads row (docs/BEYOND.md, sixteenth round).
    episode_heads: bool = False


FACTS_AS = ("text", "turn", "rank")  # SearchOptions.facts_as


# Named settings, so a run says which it used and the paper's stays comparable.
PROFILES = {
    # The Nemori paper's retrieval: k = 10 episodes, m = 2k facts, raw messages of the top r = 2.
    "paper": SearchOptions(k=10, facts=20, raw_for_top=2),
    # Made for a small answer model: facts and raw turns (each with two turns
    # either side) in one ranking, cut at about 800 tokens, shown as a dated
    # timeline. Episode narratives are left out by default: written by the
    # 0.5B model they carry its errors, and on LoCoMo conv-26 s1-5 adding them
    # (k = 3) cost 4 set-F1 points (docs/ANSWERS.md). --k brings them back.
    "budget": SearchOptions(k=0, facts=20, raw_for_top=0, messages=30, turns=2, budget=800, layout="timeline"),
}
# The default: the budget's retrieval, after a core context of the current facts and the most recent
# turns that every question shares (its KV state is computed once; retrieval/core_answer.py).
PROFILES["core"] = replace(PROFILES["budget"], core=True)
DEFAULT_PROFILE = "core"


def relevance(score: float, options: SearchOptions) -> int:
    """A fused score as a person reads it, 0 to 100: 100 is first in every list searched (by meaning and by
    words), 50 first in one of the two and absent from the other. RRF's own numbers (0.0328) mean nothing to a reader."""
    best = (1.0 if options.mode in ("hybrid", "vector") else 0.0) + (options.text_weight if options.mode in ("hybrid", "text") else 0.0)
    return min(100, round(100 * score * (RRF_K + 1) / best)) if best else 0


def fuse(ranked_lists: list[list[int]], k: int, weights: list[float] | None = None) -> list[tuple[int, float, list[int | None]]]:
    """(id, fused score, rank in each list or None), best first; ``weights`` scale each list's share."""
    scores: dict[int, float] = {}
    ranks: dict[int, list[int | None]] = {}
    for li, ids in enumerate(ranked_lists):
        weight = weights[li] if weights else 1.0
        for rank, item in enumerate(ids, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (RRF_K + rank)
            ranks.setdefault(item, [None] * len(ranked_lists))[li] = rank
    ordered = sorted(scores, key=lambda i: (-scores[i], i))[:k]
    return [(i, scores[i], ranks[i]) for i in ordered]


def _ranked(
    db: Store, user: str, query: str, query_vector, options: SearchOptions, vector_fn, text_fn, k: int
) -> tuple[list[tuple[int, float, list[int | None]]], dict[int, float]]:
    vector_hits = vector_fn(db, user, query_vector, options.candidates, as_of=options.as_of) if query_vector is not None else []
    text_hits = text_fn(db, user, query, options.candidates, as_of=options.as_of) if options.mode in ("hybrid", "text") else []
    return fuse([[i for i, _ in vector_hits], [i for i, _ in text_hits]], k, [1.0, options.text_weight]), dict(vector_hits)


def search(
    db: Store, user: str, embedder: Embedder, query: str, options: SearchOptions = SearchOptions(), mode: MemoryMode | None = None
) -> tuple[list[Hit], float]:
    """Episode hits, then what the memory mode keeps (facts, notes), then raw turns, each best first, and the milliseconds taken.

    ``mode`` defaults to the one the database was built with; it says which
    kinds exist to be searched and what is shown with every answer. Every
    read sees one committed state: another process's unit of work is in it
    whole or not at all (an episode merged away midway came back without its
    messages).
    """
    started = time.perf_counter()
    with db.snapshot():
        hits = _search(db, user, embedder, query, options, mode)
    return hits, (time.perf_counter() - started) * 1000


def _search(db: Store, user: str, embedder: Embedder, query: str, options: SearchOptions, mode: MemoryMode | None) -> list[Hit]:
    mode = mode or mode_of(db)
    query_vector = embedder.embed_query(query) if options.mode in ("hybrid", "vector") else None
    fused, similarity = (
        _ranked(db, user, query, query_vector, options, episode_sql.vector_search, episode_sql.text_search, options.k)
        if options.k
        else ([], {})
    )
    top_ids = [i for i, _, _ in fused]
    episodes = episode_sql.by_ids(db, user, top_ids, with_messages=False)
    raw_count = len(top_ids) if options.context == "messages" else options.raw_for_top
    with_raw = episode_sql.by_ids(db, user, top_ids[:raw_count], with_messages=True)
    hits = []
    for episode_id, score, (vrank, trank) in fused:
        ep = with_raw.get(episode_id) or episodes.get(episode_id)
        if ep is None:
            continue
        hits.append(
            Hit(
                kind="episode",
                id=ep.id,
                score=score,
                title=ep.title,
                text=ep.narrative,
                start=ep.start,
                end=ep.end,
                vector_rank=vrank,
                text_rank=trank,
                similarity=similarity.get(episode_id),
                messages=ep.messages,
            )
        )
    facts = _fact_hits(db, user, query, query_vector, options) if options.facts and "fact" in mode.kinds else []
    notes = _note_hits(db, user, query, query_vector, options) if options.notes and "note" in mode.kinds else []
    searches_turns = options.messages and mode.searches_raw_turns(db, user)
    voted = [m.id for _h, m in fact_turns.pointed(db, user, facts, options.as_of)] if searches_turns and options.facts_as == "rank" else []
    turns = _message_hits(db, user, query, query_vector, options, voted) if searches_turns else []
    if options.facts_as == "turn":
        hits += [*notes, *fact_turns.as_turns(db, user, facts, turns, options.turns, options.as_of)]
    elif options.facts_as == "rank":
        hits += [*notes, *turns]
    else:
        hits += [*facts, *notes, *turns]
    if options.budget:
        hits = budget.select(hits, options.budget, options.session_windows)
    hits.extend(mode.always_shown(db, user, as_of=options.as_of))
    return hits


def _message_hits(db: Store, user: str, query: str, query_vector, options: SearchOptions, voted: Sequence[int] = ()) -> list[Hit]:
    """Raw turns, searched like everything else; each brings its neighbouring turns.

    ``voted``: turns the question's facts point at, best first, fused as a third list beside meaning and words.
    """
    reads_after = options.as_of is not None and turn_vectors(db) != "turn"  # an as-of search must not rank by later words
    vector_hits = (
        message_index.vector_search(db, user, query_vector, options.candidates, as_of=options.as_of, reads_after=reads_after)
        if query_vector is not None
        else []
    )
    text_hits = (
        message_index.text_search(db, user, query, options.candidates, as_of=options.as_of) if options.mode in ("hybrid", "text") else []
    )
    lists, weights = [[i for i, _ in vector_hits], [i for i, _ in text_hits]], [1.0, options.text_weight]
    if voted:
        lists, weights = [*lists, list(voted)], [*weights, 1.0]
    dated = _dated_turns(db, user, query, query_vector, options, reads_after) if options.date_vote and query_vector is not None else []
    if dated:
        lists, weights = [*lists, dated], [*weights, options.date_vote]
    wide = len(vector_hits) + len(text_hits) + len(voted) + len(dated) if options.anchor_words else options.messages  # room to drop some
    fused, similarity = fuse(lists, wide, weights), dict(vector_hits)
    found = message_sql.by_ids(db, user, [i for i, _, _ in fused])
    if options.anchor_words:  # a line found by meaning alone must say something (retrieval/anchors.py)
        fused = [
            f
            for f in fused
            if f[2][1] is not None or (f[0] in found and anchors.says_something(query, found[f[0]].content, options.anchor_words))
        ]
    fused = fused[: options.messages]
    before = options.turns if options.turns_before < 0 else options.turns_before
    context = message_index.around(
        db, user, [found[i] for i, _, _ in fused if i in found], options.turns, before=before, as_of=options.as_of
    )
    hits = []
    for message_id, score, (vrank, trank, *_voted) in fused:
        m = found.get(message_id)
        if m is None:
            continue
        hits.append(
            Hit(
                kind="message",
                id=m.id,
                score=score,
                title=m.speaker,
                text=m.content,
                start=m.timestamp,
                end=m.timestamp,
                vector_rank=vrank,
                text_rank=trank,
                similarity=similarity.get(message_id),
                messages=tuple(context[m.id]),
            )
        )
    return hits


def _dated_turns(db: Store, user: str, query: str, query_vector, options: SearchOptions, reads_after: bool) -> list[int]:
    """The turns said around the days the question names, best match first; none when it names no day."""
    named = question_dates.named_dates(query)
    if not named:
        return []  # no day named: not even the memory's years are looked up
    spans = question_dates.spans_of(named, message_index.years(db, user))
    found = message_index.vector_search_between(
        db, user, query_vector, options.candidates, spans, as_of=options.as_of, reads_after=reads_after
    )
    return [i for i, _ in found]


def _note_hits(db: Store, user: str, query: str, query_vector, options: SearchOptions) -> list[Hit]:
    """A-MEM retrieval: the top notes (hybrid, like facts), then the notes they link to.

    Linked notes come after every top note, in the order their linkers
    ranked, each once, at most ``options.linked`` of them.
    """
    if not note_sql.count(db, user):
        return []  # a memory without notes (every mode but A-MEM's) costs nothing here
    fused, similarity = _ranked(db, user, query, query_vector, options, note_sql.vector_search, note_sql.text_search, options.notes)
    top = note_sql.by_ids(db, user, [i for i, _, _ in fused])
    chosen = [i for i, _, _ in fused if i in top]
    extra: dict[int, int] = {}  # linked note -> the top note that brought it
    for note_id in chosen:
        for other in top[note_id].links:
            if len(extra) >= options.linked:
                break
            if other not in top and other not in extra:
                extra[other] = note_id
    linked = note_sql.by_ids(db, user, list(extra), as_of=options.as_of)  # a note linked later is not shown before it was made
    hits = []
    for note_id, score, (vrank, trank) in fused:
        if note_id in top:
            hits.append(_note_hit(top[note_id], score, vrank, trank, similarity.get(note_id)))
    for note_id, source in extra.items():
        if note_id in linked:
            hits.append(replace(_note_hit(linked[note_id], 0.0, None, None, None), linked_from=source))
    return hits


def _note_hit(note, score: float, vrank, trank, similarity) -> Hit:
    return Hit(
        kind="note",
        id=note.id,
        score=score,
        title="",
        text=note.content,
        start=note.timestamp,
        end=note.timestamp,
        vector_rank=vrank,
        text_rank=trank,
        similarity=similarity,
        context=note.context,
    )


def _fact_hits(db: Store, user: str, query: str, query_vector, options: SearchOptions) -> list[Hit]:
    """Facts, searched the same hybrid way; a fact's time is its first source episode's (of those ended by ``as_of``)."""
    fused, similarity = _ranked(db, user, query, query_vector, options, fact_sql.vector_search, fact_sql.text_search, options.facts)
    facts = fact_sql.by_ids(db, user, [i for i, _, _ in fused])
    sources = episode_sql.by_ids(db, user, sorted({e for f in facts.values() for e in f.source_episode_ids}))
    hits = []
    for fact_id, score, (vrank, trank) in fused:
        fact = facts.get(fact_id)
        if fact is None:
            continue
        times = [sources[e].start for e in fact.source_episode_ids if e in sources and _ended(sources[e], options.as_of)]
        if not times:
            continue  # its episodes are gone; a fact is never shown without provenance
        hits.append(
            Hit(
                kind="fact",
                id=fact.id,
                score=score,
                title="",
                text=fact.text,
                start=min(times),
                end=max(times),
                vector_rank=vrank,
                text_rank=trank,
                similarity=similarity.get(fact_id),
            )
        )
    return hits


def _ended(episode: Episode, as_of: datetime | None) -> bool:
    """Whether an episode had ended by ``as_of`` (a later source of a fact, a duplicate seen since, is not shown before it happened)."""
    return as_of is None or to_epoch(episode.end) <= to_epoch(as_of)
