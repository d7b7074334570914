"""Nemori and its ablations as benchmark systems.

A build profile (memory/profile.py) decides how the memory is made; search
options decide how it is read. The paper's ablations are either one or the
other, so each is a system name here and `--systems nemori-ablations` reruns
the whole table in one command.
"""

from __future__ import annotations

from dataclasses import replace

from nemori_cli.bench.systems import Progress, Reply, Shared, Storage, System, answer_from, register, register_group
from nemori_cli.domain import IncomingMessage
from nemori_cli.memory.profile import DEFAULT, MEMORY_MODES, Profile
from nemori_cli.pipeline import summary
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.retrieval.search import SearchOptions, search
from nemori_cli.store import messages as message_sql
from nemori_cli.store.db import Database

PAPER_SEARCH = SearchOptions(k=10, facts=20, raw_for_top=2)  # the paper's k, m = 2k and r


class NemoriSystem(System):
    resumable = True  # an interrupted build goes on from the pending messages in its database

    def __init__(self, name: str, description: str, profile: Profile = DEFAULT, options: SearchOptions = PAPER_SEARCH):
        self.name, self.description = name, description
        self.profile, self.options = profile, options
        p = profile
        self.build_key = f"nemori-{p.memory}-{p.distill if p.facts else 'nofacts'}-{'int' if p.integrate else 'noint'}-{p.index}"

    def build(self, db: Database, user: str, messages: list[IncomingMessage], shared: Shared, progress: Progress | None) -> None:
        pipeline = Pipeline(db, user, shared.llm, shared.embedder, profile=self.profile, semantic=shared.semantic)
        pipeline.store(messages)
        pipeline.process(flush=True, progress=progress)  # resumes where an interrupted build stopped

    def answer(self, db: Database, user: str, question: str, today: str | None, shared: Shared) -> Reply:
        hits, search_ms = search(db, user, shared.embedder, question, self.options)
        text, prompt_tokens, completion_tokens, answer_ms, failed = answer_from(
            shared, question, hits, today=today, raw_for_top=self.options.raw_for_top, context=self.options.context
        )
        episode_ids = [h.id for h in hits if h.kind == "episode"]
        owned = message_sql.of_episodes(db, user, episode_ids) if episode_ids else {}
        turns = tuple(m.source_id for e in episode_ids for m in owned.get(e, []) if m.source_id)
        return Reply(text, turns, len(hits), prompt_tokens, completion_tokens, search_ms, answer_ms, failed)

    def storage(self, db: Database, user: str, shared: Shared) -> Storage:
        episodes = db.query("SELECT title, narrative FROM episodes WHERE user_id = ? AND status = 'active'", (user,))
        facts = db.query("SELECT text FROM facts WHERE user_id = ? AND status = 'active'", (user,))
        texts = [f"{e['title']}\n{e['narrative']}" for e in episodes] + [f["text"] for f in facts]
        latest = summary.current(db, user)
        if latest is not None:
            texts.append(latest[1])
        return Storage(
            entries=len(texts),
            characters=sum(len(t) for t in texts),
            tokens=sum(shared.count_tokens(t) for t in texts),
            detail={"episodes": len(episodes), "facts": len(facts), "summary": int(latest is not None)},
        )


_ABLATIONS = (
    NemoriSystem("nemori", "Nemori: episodes (narrative, integrated) and facts by prediction error, consolidated; k=10, m=20, r=2"),
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
    NemoriSystem("nemori-direct", "facts extracted directly, no prediction: the paper's Nemori-s", profile=replace(DEFAULT, distill="direct")),
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

# Every other management mode registers as nemori-<mode> (naive-rag: facts
# appended with no consolidation; summary: one running summary).
for _mode in MEMORY_MODES:
    if _mode != "native":
        register(
            NemoriSystem(
                f"nemori-{_mode}",
                f"Nemori's episodes with --memory {_mode}",
                profile=replace(DEFAULT, memory=_mode, facts=_mode != "summary"),
            )
        )

register_group("nemori-ablations", tuple(s.name for s in _ABLATIONS) + tuple(f"nemori-{m}" for m in MEMORY_MODES if m != "native"))
