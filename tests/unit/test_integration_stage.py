"""Associative integration with fake models: each decision branch, and what a merge leaves behind."""

from __future__ import annotations

from datetime import datetime, timedelta

from nemori_cli.memory.profile import Profile
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.retrieval.search import SearchOptions, search
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import messages as message_sql
from nemori_cli.store import telemetry
from tests.unit.fakeworld import World, chat, is_self_check, real_prompts

DAY1 = datetime(2023, 5, 8, 10, 0)
BOATS = ["sailing", "boat", "harbour", "regatta", "Malta"]


def run(db, llm, embedder, messages, profile=Profile(facts=False)):
    pipe = Pipeline(db, "u", llm, embedder, profile=profile)
    pipe.add_messages(messages)
    return pipe.process(flush=True)


def events(db, kind):
    return [r["detail"] for r in db.query("SELECT detail FROM stage_events WHERE kind = ? AND stage = 'integration'", (kind,))]


def test_a_continuation_is_merged_and_supersedes_both_parts(db, llm, backend, embedder):
    world = World(
        backend, MergedEpisode={"title": "Ann's regatta in Malta", "narrative": "On 8 May 2023 Ann planned and sailed the regatta."}
    )
    run(db, llm, embedder, chat(BOATS, start=DAY1))
    world.answers["Continuation"] = {"same_event": True}
    report = run(db, llm, embedder, chat(BOATS, start=DAY1 + timedelta(hours=3), tag="later"))

    assert report.merged == 1 and report.episodes == 0
    (live,) = episode_sql.list_all(db, "u", with_messages=True)
    assert live.id == 3 and live.boundary == "merged" and live.title == "Ann's regatta in Malta"
    assert len(live.messages) == 8 and live.start == DAY1  # both parts' messages, in time order
    assert [m.timestamp for m in live.messages] == sorted(m.timestamp for m in live.messages)
    old, new = episode_sql.get(db, "u", 1), episode_sql.get(db, "u", 2)
    assert old.status == new.status == "superseded" and old.superseded_by == new.superseded_by == 3
    assert "merged into E3" in old.superseded_reason and "continues E1" in new.superseded_reason
    assert [p.id for p in episode_sql.parts(db, "u", 3)] == [1, 2]
    # Superseded episodes leave both indexes: search finds only the merged one.
    hits, _ = search(db, "u", embedder, "sailing regatta Malta", SearchOptions(k=10, facts=0))
    assert [h.id for h in hits] == [3]
    assert db.one("SELECT count(*) AS n FROM episode_vec WHERE rowid IN (1, 2)")["n"] == 0
    assert message_sql.count_pending(db, "u") == 0
    assert any("continues E1" in d for d in events(db, "decision"))


def test_none_keeps_both_episodes_and_logs_the_decision(db, llm, backend, embedder):
    World(backend)
    run(db, llm, embedder, chat(BOATS, start=DAY1))
    run(db, llm, embedder, chat(BOATS, start=DAY1 + timedelta(hours=3), tag="later"))
    (prompt,) = real_prompts(backend, "Continuation")
    assert "EARLIER episode: (8 May 2023 10:00)" in prompt[-1]["content"]  # the earlier episode, with its date
    assert episode_sql.count(db, "u") == 2
    assert any("continues none of E1" in d for d in events(db, "decision"))


def test_no_similar_episode_means_no_call(db, llm, backend, embedder):
    World(backend)
    run(db, llm, embedder, chat(BOATS, start=DAY1))
    run(db, llm, embedder, chat(["tax", "forms", "accountant", "receipts", "deadline"], start=DAY1 + timedelta(hours=3)))
    assert real_prompts(backend, "Continuation") == []
    assert episode_sql.count(db, "u") == 2


def test_an_episode_weeks_later_is_not_offered_as_a_continuation(db, llm, backend, embedder):
    World(backend)
    run(db, llm, embedder, chat(BOATS, start=DAY1))
    run(db, llm, embedder, chat(BOATS, start=DAY1 + timedelta(days=30), tag="later"))
    assert real_prompts(backend, "Continuation") == []


def test_an_unusable_merge_joins_the_two_narratives_and_counts_a_fallback(db, llm, backend, embedder):
    World(backend, MergedEpisode="{not json")
    run(db, llm, embedder, chat(BOATS, start=DAY1))
    first = episode_sql.get(db, "u", 1)
    backend.default.answers["Continuation"] = {"same_event": True}
    run(db, llm, embedder, chat(BOATS, start=DAY1 + timedelta(hours=1), tag="later"))
    (live,) = episode_sql.list_all(db, "u")
    assert live.narrative.startswith(first.narrative) and "later" in live.narrative
    stage = next(s for s in telemetry.stage_stats(db, "u") if s["stage"] == "integration")
    assert stage["fallbacks"] == 1 and stage["decisions"] == 2  # the self-check passed, then the choice


def test_integration_switched_off_makes_no_call(db, llm, backend, embedder):
    World(backend)
    run(db, llm, embedder, chat(BOATS, start=DAY1), profile=Profile(facts=False, integrate=False))
    run(db, llm, embedder, chat(BOATS, start=DAY1 + timedelta(hours=3), tag="later"), profile=Profile(facts=False, integrate=False))
    assert real_prompts(backend, "Continuation") == []
    assert episode_sql.count(db, "u") == 2


def test_a_model_that_fails_the_self_check_merges_nothing(db, llm, backend, embedder):
    world = World(backend, Continuation={"same_event": True})
    world.passes_continuation_check = False
    run(db, llm, embedder, chat(BOATS, start=DAY1))
    run(db, llm, embedder, chat(BOATS, start=DAY1 + timedelta(hours=3), tag="later"))
    assert real_prompts(backend, "Continuation") == []
    assert episode_sql.count(db, "u") == 2
    assert any("failed the continuation self-check" in d for d in events(db, "fallback"))


def test_the_self_check_is_asked_once_per_run(db, llm, backend, embedder):
    World(backend)
    pipe = Pipeline(db, "u", llm, embedder, profile=Profile(facts=False))
    pipe.add_messages(
        chat(BOATS, start=DAY1)
        + chat(BOATS, start=DAY1 + timedelta(hours=3), tag="b")
        + chat(BOATS, start=DAY1 + timedelta(hours=6), tag="c")
    )
    pipe.process(flush=True)
    checks = [p for p in backend.prompts_for("Continuation") if is_self_check(p)]
    assert len(checks) == 2  # two fixed cases, once
    assert len(real_prompts(backend, "Continuation")) == 3  # E2 about E1; E3 about E2 and E1
