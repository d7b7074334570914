"""Consolidation with fake models: new, duplicate, merge, conflict, the repairs, and naive-rag."""

from __future__ import annotations

from datetime import datetime, timedelta

from nemori_cli.memory.profile import Profile
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.retrieval.search import SearchOptions, search
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import telemetry
from tests.unit.fakeworld import World, chat

SPRING = datetime(2024, 3, 1, 9, 0)
AUTUMN = datetime(2024, 9, 20, 9, 0)


def two_episodes(db, llm, backend, embedder, first_facts, second_facts, profile=Profile(facts=True, integrate=False), **answers):
    world = World(backend, **answers)
    world.facts = [first_facts, second_facts]
    pipe = Pipeline(db, "u", llm, embedder, profile=profile)
    pipe.store(chat(["Ann", "flat", "Paris", "Berlin", "moving"], start=SPRING))
    pipe.process(flush=True)
    pipe.store(chat(["Ann", "flat", "Paris", "Berlin", "moving"], start=AUTUMN, tag="again"))
    pipe.process(flush=True)
    return world


def stage(db, name):
    return next(s for s in telemetry.stage_stats(db, "u") if s["stage"] == name)


def test_first_fact_is_new_without_a_call(db, llm, backend, embedder):
    two_episodes(db, llm, backend, embedder, ["Ann lives in Paris."], [])
    assert backend.prompts_for("Consolidation") == []
    (fact,) = fact_sql.list_all(db, "u")
    assert fact.origin == "new" and fact.status == "active"


def test_conflict_supersedes_the_old_fact_with_its_reason(db, llm, backend, embedder):
    two_episodes(db, llm, backend, embedder, ["Ann lives in Paris."], ["Ann lives in Berlin."], Consolidation={"action": "conflict", "targets": [1]})
    (prompt,) = backend.prompts_for("Consolidation")
    assert "[1] Ann lives in Paris." in prompt[-1]["content"] and "NEW fact: Ann lives in Berlin." in prompt[-1]["content"]
    paris, berlin = fact_sql.get(db, "u", 1), fact_sql.get(db, "u", 2)
    assert paris.status == "superseded" and paris.superseded_by == 2 and paris.superseded_at
    assert "contradicted by F2" in paris.superseded_reason and "Berlin" in paris.superseded_reason
    assert berlin.status == "active" and berlin.origin == "conflict" and berlin.source_episode_ids == (2,)
    assert [f.id for f in fact_sql.replaced(db, "u", 2)] == [1]
    hits, _ = search(db, "u", embedder, "where does Ann live", SearchOptions(k=5, facts=5))
    assert [h.text for h in hits if h.kind == "fact"] == ["Ann lives in Berlin."]
    assert stage(db, "consolidation")["decisions"] == 1


def test_merge_replaces_targets_with_one_fact_carrying_all_sources(db, llm, backend, embedder):
    two_episodes(
        db, llm, backend, embedder, ["Ann lives in Paris."], ["Ann lives in Paris with a cat."],
        Consolidation={"action": "merge", "targets": [1], "merged": "Ann lives in Paris with her cat."},
    )
    old, merged = fact_sql.get(db, "u", 1), fact_sql.get(db, "u", 2)
    assert old.status == "superseded" and old.superseded_by == 2 and "merged into F2" in old.superseded_reason
    assert merged.text == "Ann lives in Paris with her cat." and merged.origin == "merge"
    assert merged.source_episode_ids == (1, 2)
    assert [f.text for f in fact_sql.list_all(db, "u")] == ["Ann lives in Paris with her cat."]


def test_the_same_fact_again_only_gains_a_source(db, llm, backend, embedder):
    two_episodes(db, llm, backend, embedder, ["Ann lives in Paris."], ["Ann lives in Paris!"])
    assert backend.prompts_for("Consolidation") == []
    (fact,) = fact_sql.list_all(db, "u", include_superseded=True)
    assert fact.source_episode_ids == (1, 2)


def test_a_conflict_about_someone_else_is_demoted_to_new(db, llm, backend, embedder):
    two_episodes(db, llm, backend, embedder, ["Ann lives in Paris."], ["Bob lives in Berlin."], Consolidation={"action": "conflict", "targets": [1]})
    assert [f.status for f in fact_sql.list_all(db, "u", include_superseded=True)] == ["active", "active"]
    assert stage(db, "consolidation")["repaired"] == 1


def test_a_merge_without_text_keeps_both_facts(db, llm, backend, embedder):
    two_episodes(db, llm, backend, embedder, ["Ann lives in Paris."], ["Ann lives in Paris now."], Consolidation={"action": "merge", "targets": [1]})
    assert [f.status for f in fact_sql.list_all(db, "u", include_superseded=True)] == ["active", "active"]
    assert stage(db, "consolidation")["repaired"] == 1


def test_an_unusable_answer_keeps_the_fact_as_new_and_counts_a_fallback(db, llm, backend, embedder):
    two_episodes(db, llm, backend, embedder, ["Ann lives in Paris."], ["Ann lives in Berlin."], Consolidation="{broken")
    assert fact_sql.count(db, "u") == 2
    assert stage(db, "consolidation")["fallbacks"] == 1


def test_naive_rag_appends_without_consolidating(db, llm, backend, embedder):
    two_episodes(
        db, llm, backend, embedder, ["Ann lives in Paris."], ["Ann lives in Berlin."],
        profile=Profile(memory="naive-rag", facts=True, integrate=False), Consolidation={"action": "conflict", "targets": [1]},
    )
    assert backend.prompts_for("Consolidation") == []
    assert [f.status for f in fact_sql.list_all(db, "u", include_superseded=True)] == ["active", "active"]


def test_facts_of_one_episode_are_consolidated_against_each_other(db, llm, backend, embedder):
    two_episodes(
        db, llm, backend, embedder, ["Ann lives in Paris.", "Ann lives in Berlin."], [],
        Consolidation={"action": "conflict", "targets": [1]},
    )
    assert fact_sql.get(db, "u", 1).superseded_by == 2
