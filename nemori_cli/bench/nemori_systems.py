"""Nemori and its ablations as benchmark systems.

A build profile (memory/profile.py) decides how the memory is made; search
options decide how it is read. The paper's ablations are either one or the
other, so each is a system name here and `--systems nemori-ablations` reruns
the whole table in one command.
"""

from __future__ import annotations

from dataclasses import replace

from nemori_cli.bench.systems import Listing, Progress, Reply, Shared, Storage, System, reply
from nemori_cli.domain import IncomingMessage
from nemori_cli.memory import modes, summary
from nemori_cli.memory.profile import DEFAULT, Profile
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.retrieval.answer import ask
from nemori_cli.retrieval.search import PROFILES, SearchOptions
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import messages as message_sql
from nemori_cli.store import notes as note_sql
from nemori_cli.store.contract import Store

PAPER_SEARCH = PROFILES["paper"]  # the paper's k, m = 2k and r
BUDGET_SEARCH = PROFILES["budget"]  # what `nemori ask` uses by default
OFFERED = Listing()  # the systems and groups below; bench/catalog.py registers them by name
register, register_group = OFFERED.register, OFFERED.register_group


class NemoriSystem(System):
    resumable = True  # an interrupted build goes on from the pending messages in its database

    def __init__(
        self, name: str, description: str, profile: Profile = DEFAULT, options: SearchOptions = PAPER_SEARCH, *, notes_only: bool = False
    ):
        # The paper's retrieval is the default here so that every ablation reads its memory the way
        # the paper's table does; `nemori` itself answers the way `nemori ask` does.
        self.name, self.description = name, description
        self.profile, self.options = profile, options
        self.notes_only = notes_only  # storage counts the notes alone, as the Nemori paper compares A-MEM's
        p = profile
        self.build_key = f"nemori-{p.memory}-{p.distill if p.facts else 'nofacts'}-{'int' if p.integrate else 'noint'}-{p.index}"
        if p.partition != "model":  # memories cut by the model keep the key they had before the choice existed
            self.build_key += f"-{p.partition}"
        if p.turn_vectors != "turn":  # likewise for memories whose turns were embedded alone
            self.build_key += f"-{p.turn_vectors}"

    def for_model(self, partition: str) -> NemoriSystem:
        """This system as `nemori ingest` builds it with a model whose preset cuts episodes by ``partition``."""
        if not modes.for_profile(self.profile).makes_episodes or partition == self.profile.partition:
            return self
        twin = NemoriSystem(
            self.name, self.description, replace(self.profile, partition=partition), self.options, notes_only=self.notes_only
        )
        return twin

    def build(self, db: Store, user: str, messages: list[IncomingMessage], shared: Shared, progress: Progress | None) -> None:
        pipeline = Pipeline(db, user, shared.llm, shared.embedder, profile=self.profile, semantic=shared.semantic)
        pipeline.add_messages(messages)
        pipeline.process(flush=True, progress=progress)  # resumes where an interrupted build stopped

    def answer(self, db: Store, user: str, question: str, today: str | None, shared: Shared) -> Reply:
        answer, _ = ask(db, user, shared.embedder, shared.answerer, question, self.options, today=today)
        return reply(shared, answer, search_ms=answer.search_ms, turns=_turns(db, user, list(answer.hits)), memories=len(answer.hits))

    def storage(self, db: Store, user: str, shared: Shared) -> Storage:
        episodes = episode_sql.active_texts(db, user)
        facts = fact_sql.active_texts(db, user)
        texts = episodes + facts
        latest = summary.current(db, user)
        if latest is not None:
            texts.append(latest[1])
        # A note is stored with its attributes, and they are what it is found by: all counted.
        notes = note_sql.list_all(db, user) if self.options.notes else []
        notes_only = self.notes_only
        if notes_only:
            texts = texts[len(episodes) :]  # A-MEM's storage alone, as the Nemori paper compares it
        texts += [note_sql.embedding_text(n.content, n.keywords, n.tags, n.context) for n in notes]
        return Storage(
            entries=len(texts),
            characters=sum(len(t) for t in texts),
            tokens=sum(shared.count_tokens(t) for t in texts),
            detail={
                "episodes": 0 if notes_only else len(episodes),
                "facts": len(facts),
                "summary": int(latest is not None),
                "notes": len(notes),
                "links": sum(len(n.links) for n in notes) // 2,
                "evolved": note_sql.count_evolved(db, user),
            },
        )


class CoreNemoriSystem(NemoriSystem):
    """Nemori as `nemori ask` answers by default: the cached core context, then retrieval beyond it (retrieval/core_answer.py).

    The core's KV state stays in the answer model between the questions of a
    conversation (it is pinned); the first question of each conversation
    reads it, and its note says how long that took.
    """

    def __init__(
        self,
        name: str,
        description: str,
        profile: Profile = DEFAULT,
        options: SearchOptions = PAPER_SEARCH,
        *,
        tail: int | None = None,
        **shape,
    ):
        super().__init__(name, description, profile, options)
        self.tail = tail  # tokens retrieval may add beyond the core; None: core_answer's default
        self.cold = False  # True: a core not yet read is treated as `ask` treats one no process saved (UnbuiltNemoriSystem)
        self.shape = shape  # other CoreBudget fields (facts=False, focus=0): the ablations

    def for_model(self, partition: str) -> NemoriSystem:
        twin = super().for_model(partition)
        if twin is self:
            return self
        return CoreNemoriSystem(twin.name, twin.description, twin.profile, twin.options, tail=self.tail, **self.shape)

    def answer(self, db: Store, user: str, question: str, today: str | None, shared: Shared) -> Reply:
        from nemori_cli.retrieval import core_answer
        from nemori_cli.retrieval.core import Core
        from nemori_cli.retrieval.core_cache import CoreCache

        cache = CoreCache(None)  # in this process only: the pinned state serves every question of the conversation

        def prepare(core: Core) -> None:
            cache.prepare(shared.answerer, user, core)  # what it did is read back from cache.last below

        sizes = replace(core_answer.budget_for(shared.context_window, *(() if self.tail is None else (self.tail,))), **self.shape)
        answer = core_answer.ask(
            db,
            user,
            shared.embedder,
            shared.answerer,
            question,
            self.options,
            sizes=sizes,
            today=today,
            prepare=prepare,
            # As `nemori ask` decides for a core no process has saved (unbuilt: no build has read it).
            to_read=(lambda core: cache.to_read(shared.answerer, user, core)) if self.cold else None,
            prepare_head=lambda head: cache.prepare(shared.answerer, user, head),  # as `ask` does (no file here)
        )
        prepared = cache.last
        note = (
            f"core of {prepared.tokens} tokens read in {prepared.ms / 1000:.1f} s"
            if prepared is not None and prepared.outcome == "built"
            else ""
        )
        return reply(
            shared, answer, search_ms=answer.search_ms, turns=_turns(db, user, list(answer.hits)), memories=len(answer.hits), note=note
        )


class UnbuiltNemoriSystem(CoreNemoriSystem):
    """What `nemori ask` answers after `ingest --build later`, before any episode or fact exists.

    The build stores and indexes the messages as `ingest --build later` does
    (its seconds are the time until the history is searchable); the answer is
    `nemori ask`'s default road over raw turns alone.
    """

    def __init__(self, name: str, description: str, profile: Profile = DEFAULT, *, options: SearchOptions, cold: bool = True, **shape):
        super().__init__(name, description, profile, options=options, **shape)
        self.build_key = "nemori-unbuilt"  # whatever the model's partition: nothing is partitioned
        if self.profile.turn_vectors != "turn":
            self.build_key += f"-{self.profile.turn_vectors}"
        # No build has read the core: beyond the window `ask` answers on the short road (core_answer.COLD_CORE_TOKENS).
        # cold=False reads the core on the first question and keeps it (nemori-unbuilt-core: the road before that rule).
        self.cold = cold

    def for_model(self, partition: str) -> NemoriSystem:
        return self

    def build(self, db: Store, user: str, messages: list[IncomingMessage], shared: Shared, progress: Progress | None) -> None:
        pipeline = Pipeline(db, user, shared.llm, shared.embedder, profile=self.profile, semantic=shared.semantic)
        pipeline.add_messages(messages)
        if progress:
            progress(len(messages), len(messages))


def _turns(db: Store, user: str, hits) -> tuple[str, ...]:
    """Source ids of the raw turns behind what was retrieved: episodes' messages, notes' message or episode."""
    episode_ids = [h.id for h in hits if h.kind == "episode"]
    notes = note_sql.by_ids(db, user, [h.id for h in hits if h.kind == "note"])
    episode_ids += [n.episode_id for n in notes.values() if n.episode_id is not None and n.episode_id not in episode_ids]
    owned = message_sql.of_episodes(db, user, episode_ids) if episode_ids else {}
    turns = [m.source_id for e in episode_ids for m in owned.get(e, []) if m.source_id]
    turns += [m.source_id for h in hits if h.kind == "message" for m in h.messages if m.source_id]
    messages = message_sql.by_ids(db, user, [n.message_id for n in notes.values() if n.message_id is not None])
    turns += [m.source_id for m in messages.values() if m.source_id]
    return tuple(dict.fromkeys(turns))


_ABLATIONS = (
    CoreNemoriSystem(
        "nemori",
        "Nemori as `nemori ask` answers: where the whole history fits, a cached core (current facts, then the turns) and "
        "the best-matching turns again; beyond the window, ~450 tokens of raw turns (two either side) ranked for the question",
        options=PROFILES["core"],
    ),
    # Until the sixth round `ask` kept the core beyond the window too; these rows keep that road, so their records keep
    # their meaning (the core-road ablations below measure the core, which beyond the window only this road reads).
    CoreNemoriSystem(
        "nemori-core-road",
        "nemori with the core road beyond the window (the default before the sixth round): a cached core (current facts, "
        "then the most recent turns that fit the window), then facts and older turns retrieved beyond it (~200 tokens), "
        "then the best-matching turns again",
        options=PROFILES["core"],
        beyond="core",
    ),
    CoreNemoriSystem(
        "nemori-wide",
        "nemori-core-road with 800 tokens retrieved beyond the core instead of 200 (a smaller core, more retrieval read per question)",
        options=PROFILES["core"],
        tail=800,
        beyond="core",
    ),
    CoreNemoriSystem(
        "nemori-core-nofacts",
        "nemori-core-road without the facts in its core (raw turns only)",
        options=PROFILES["core"],
        facts=False,
        beyond="core",
    ),
    CoreNemoriSystem(
        "nemori-core-nofocus",
        "nemori-core-road without the best-matching turns shown again",
        options=PROFILES["core"],
        focus=0,
        beyond="core",
    ),
    CoreNemoriSystem(
        "nemori-core-focus1",
        "nemori-core-road with only the best-matching turn shown again",
        options=PROFILES["core"],
        focus=1,
        beyond="core",
    ),
    CoreNemoriSystem(
        "nemori-core-cut12",
        "nemori-core-road with each best-matching turn shown again cut to the 12 words around the question's",
        options=PROFILES["core"],
        focus_words=12,
        beyond="core",
    ),
    UnbuiltNemoriSystem(
        "nemori-unbuilt",
        "what `nemori ask` answers after `ingest --build later`, before any episode or fact is made (raw turns only; "
        "beyond the window the short road, as no build has read the core)",
        options=PROFILES["core"],
    ),
    UnbuiltNemoriSystem(
        "nemori-unbuilt-core",
        "nemori-unbuilt with its core read on the first question and kept (what `ask` did before a cold core was left unread)",
        options=PROFILES["core"],
        cold=False,
        beyond="core",
    ),
    UnbuiltNemoriSystem(
        "nemori-unbuilt-short",
        "nemori-unbuilt with the short road beyond the window: raw turns (two either side) ranked for the question, ~800 tokens, no core",
        options=PROFILES["core"],
        beyond="short",
        short=800,
    ),
    UnbuiltNemoriSystem(
        "nemori-unbuilt-s800",
        "nemori-unbuilt with the short road's context at ~800 tokens (the default before the fourth round) instead of ~450",
        options=PROFILES["core"],
        short=800,
    ),
    UnbuiltNemoriSystem(
        "nemori-unbuilt-s450",
        "nemori-unbuilt with ~450 tokens of raw turns (two either side) beyond the window: the default now, kept under the name it was tuned as",
        options=PROFILES["core"],
        short=450,
    ),
    UnbuiltNemoriSystem(
        "nemori-unbuilt-s450-t1",
        "nemori-unbuilt-s450 with one turn either side of each found turn instead of two (more turns found in the same tokens)",
        options=replace(PROFILES["core"], turns=1),
        short=450,
    ),
    UnbuiltNemoriSystem(
        "nemori-unbuilt-s300-t1",
        "nemori-unbuilt with ~300 tokens of raw turns (one either side) beyond the window",
        options=replace(PROFILES["core"], turns=1),
        short=300,
    ),
    # Fifth round: no neighbours. Over the tuning split's 133 questions with evidence, the found turns alone held 62% of
    # the gold turns in ~415 tokens against 54% for two either side in ~420 (scripts/recall_sweep.py, no model).
    UnbuiltNemoriSystem(
        "nemori-unbuilt-s400-t0",
        "nemori-unbuilt with ~400 tokens of raw turns beyond the window, each found turn alone (no turns either side)",
        options=replace(PROFILES["core"], turns=0),
        short=400,
    ),
    UnbuiltNemoriSystem(
        "nemori-unbuilt-s300-t0",
        "nemori-unbuilt with ~300 tokens of raw turns beyond the window, each found turn alone (no turns either side)",
        options=replace(PROFILES["core"], turns=0),
        short=300,
    ),
    # The same shape, ranked with the full-text list weighted twice the vector list: 57% of the gold turns against 54%
    # in the same tokens (scripts/recall_sweep.py); the found-turns-alone rows found more and answered worse.
    UnbuiltNemoriSystem(
        "nemori-unbuilt-tw2",
        "nemori-unbuilt with the short road's ranking weighting full text (BM25) twice the vectors (~450 tokens, two either side)",
        options=replace(PROFILES["core"], text_weight=2.0),
    ),
    UnbuiltNemoriSystem(
        "nemori-unbuilt-wide",
        "nemori-unbuilt with 800 tokens retrieved beyond the core instead of 200 (a smaller core)",
        options=PROFILES["core"],
        cold=False,
        beyond="core",
        tail=800,
    ),
    UnbuiltNemoriSystem(
        "nemori-unbuilt-lean",
        "nemori-unbuilt with the lean road beyond the window: a cached core of the newest ~1,000 tokens, then ~800 tokens "
        "of raw turns ranked for the question",
        options=PROFILES["core"],
        cold=False,
        beyond="lean",
    ),
    CoreNemoriSystem(
        "nemori-lean",
        "nemori with the lean road beyond the window: a cached core of ~1,000 tokens (facts, then the newest turns), then "
        "~800 tokens of facts and raw turns ranked for the question",
        options=PROFILES["core"],
        beyond="lean",
    ),
    CoreNemoriSystem(
        "nemori-lean-ep3",
        "nemori-lean with the 3 best episodes (narratives with their absolute dates) in the question's ranking too",
        options=replace(PROFILES["core"], k=3),
        beyond="lean",
    ),
    CoreNemoriSystem(
        "nemori-short",
        "nemori with the short road beyond the window: facts and raw turns (two either side) in one ranking for the question, "
        "~800 tokens, no core; the core where the whole history fits",
        options=PROFILES["core"],
        beyond="short",
        short=800,
        short_facts=True,
    ),
    # Fifth round: built, conv-43's core road scored 26.6 where the unbuilt short road scored 31.5 (docs/BEYOND.md).
    CoreNemoriSystem(
        "nemori-s450",
        "nemori with the short road beyond the window at its shipped size: facts and raw turns (two either side) in one "
        "ranking for the question, ~450 tokens, no core; the core where the whole history fits",
        options=PROFILES["core"],
        beyond="short",
        short=450,
        short_facts=True,
    ),
    # Sixth round: the facts out of the short road's ranking, so a built memory answers beyond the window as an unbuilt
    # one does (the 0.5B model's facts took a found turn's place on conv-26: 28.8 against the unbuilt road's 32.2).
    CoreNemoriSystem(
        "nemori-s450-turns",
        "nemori-s450 with raw turns alone in the short road's ranking (no facts): what nemori does since the sixth round; "
        "the core, with its facts, where the whole history fits",
        options=replace(PROFILES["core"], facts=0),
        beyond="short",
        short=450,
    ),
    CoreNemoriSystem(
        "nemori-s450-ft",
        "nemori-s450 with each fact found for the question shown as the raw turn it came from (two either side), in the "
        "fact's place in the ranking; the core, with its facts, where the whole history fits",
        options=replace(PROFILES["core"], facts_as="turn"),
        beyond="short",
        short=450,
        short_facts=True,
    ),
    CoreNemoriSystem(
        "nemori-short-ep3",
        "nemori-short with the 3 best episodes (narratives with their dates) in the ranking too",
        options=PROFILES["core"],
        beyond="short",
        short=800,
        short_facts=True,
        short_episodes=3,
    ),
    NemoriSystem(
        "nemori-budget",
        "issue 15's road: facts and raw turns (2 either side) in one ranking cut at ~800 tokens, on a dated timeline",
        options=BUDGET_SEARCH,
    ),
    NemoriSystem("nemori-paper", "Nemori with the paper's retrieval and layout: k=10 episodes, m=20 facts, raw messages of the top r=2"),
    NemoriSystem(
        "nemori-text",
        "nemori with full-text (BM25) retrieval alone, no vectors",
        options=replace(BUDGET_SEARCH, mode="text"),
    ),
    NemoriSystem(
        "nemori-narratives",
        "nemori with episode narratives in the ranking too (k=10)",
        options=replace(BUDGET_SEARCH, k=10),
    ),
    NemoriSystem(
        "nemori-no-episodic",
        "Nemori's memory answered from facts only (k=0): the paper's 'w/o episodic memory'",
        options=replace(PAPER_SEARCH, k=0),
    ),
    NemoriSystem(
        "nemori-no-semantic",
        "episodes only, no facts distilled: the paper's 'w/o semantic memory'",
        profile=replace(DEFAULT, facts=False),
        options=replace(PAPER_SEARCH, facts=0),
    ),
    NemoriSystem(
        "nemori-direct", "facts extracted directly, no prediction: the paper's Nemori-s", profile=replace(DEFAULT, distill="direct")
    ),
    NemoriSystem("nemori-no-integration", "episodes never merged into the one they continue", profile=replace(DEFAULT, integrate=False)),
    NemoriSystem(
        "nemori-messages",
        "episodes indexed and shown as their raw messages (the paper's P variant)",
        profile=replace(DEFAULT, index="messages"),
        options=replace(PAPER_SEARCH, context="messages"),
    ),
)

for _system in _ABLATIONS:
    register(_system)

# The other episodic management modes register as nemori-<mode> (naive-rag:
# facts appended with no consolidation; summary: one running summary).
_OTHER_MODES = tuple(
    NemoriSystem(
        f"nemori-{m.name}", f"Nemori's episodes with --memory {m.name}", profile=replace(DEFAULT, memory=m.name, facts=m.distils_facts)
    )
    for m in (modes.SUMMARY, modes.NAIVE_RAG)
)
for _system in _OTHER_MODES:
    register(_system)

register_group("nemori-ablations", tuple(s.name for s in (*_ABLATIONS, *_OTHER_MODES)))
