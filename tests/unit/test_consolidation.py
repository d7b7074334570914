"""Consolidation with fake models: new, duplicate, merge, conflict, the self-check, the repairs, naive-rag."""

from __future__ import annotations

from datetime import datetime

from nemori_cli.memory.profile import Profile
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.retrieval.search import SearchOptions, search
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import telemetry
from tests.unit.fakeworld import World, chat

SPRING = datetime(2024, 3, 1, 9, 0)
AUTUMN = datetime(2024, 9, 20, 9, 0)


def judge(outdated_pairs: set[tuple[str, str]]):
    """An `Outdated` answer: passes the self-check, then says yes only for the given (older, newer) pairs."""

    def answer(messages, schema):
        text = messages[-1]["content"]
        older = text.split("OLDER fact: ")[1].split("\n")[0]
        newer = text.split("NEWER fact: ")[1].split("\n")[0]
        if older.startswith("Sam works as a nurse"):
            return {"outdated": "pilot" in newer}
        return {"outdated": (older, newer) in outdated_pairs}

    return answer


def two_episodes(db, llm, backend, embedder, first_facts, second_facts, profile=Profile(facts=True, integrate=False), outdated=()):
    world = World(backend, Outdated=judge(set(outdated)))
    world.facts = [first_facts, second_facts]
    pipe = Pipeline(db, "u", llm, embedder, profile=profile)
    pipe.add_messages(chat(["Ann", "flat", "Paris", "Berlin", "moving"], start=SPRING))
    pipe.process(flush=True)
    pipe.add_messages(chat(["Ann", "flat", "Paris", "Berlin", "moving"], start=AUTUMN, tag="again"))
    pipe.process(flush=True)
    return world


def stage(db, name):
    return next(s for s in telemetry.stage_stats(db, "u") if s["stage"] == name)


def questions(backend):
    """The (older, newer) pairs the model was asked about, self-check excluded."""
    asked = []
    for prompt in backend.prompts_for("Outdated"):
        text = prompt[-1]["content"]
        pair = (text.split("OLDER fact: ")[1].split("\n")[0], text.split("NEWER fact: ")[1].split("\n")[0])
        if not pair[0].startswith("Sam "):
            asked.append(pair)
    return asked


def test_first_fact_is_new_without_a_call(db, llm, backend, embedder):
    two_episodes(db, llm, backend, embedder, ["Ann lives in Paris."], [])
    assert backend.prompts_for("Outdated") == []
    (fact,) = fact_sql.list_all(db, "u")
    assert fact.origin == "new" and fact.status == "active"


def test_conflict_supersedes_the_old_fact_with_its_reason(db, llm, backend, embedder):
    paris, berlin = "Ann lives in Paris.", "Ann lives in Berlin."
    two_episodes(db, llm, backend, embedder, [paris], [berlin], outdated={(paris, berlin)})
    assert questions(backend) == [(paris, berlin)]
    old, new = fact_sql.get(db, "u", 1), fact_sql.get(db, "u", 2)
    assert old.status == "superseded" and old.superseded_by == 2 and old.superseded_at
    assert "outdated by F2" in old.superseded_reason and "Berlin" in old.superseded_reason
    assert new.status == "active" and new.origin == "conflict" and new.source_episode_ids == (2,)
    assert [f.id for f in fact_sql.replaced(db, "u", 2)] == [1]
    hits, _ = search(db, "u", embedder, "where does Ann live", SearchOptions(k=5, facts=5))
    assert [h.text for h in hits if h.kind == "fact"] == [berlin]
    assert stage(db, "consolidation")["decisions"] == 1


def test_not_outdated_means_new_and_both_stay(db, llm, backend, embedder):
    two_episodes(db, llm, backend, embedder, ["Ann lives in Paris."], ["Ann lives in Paris with a cat."])
    assert len(questions(backend)) == 1
    assert [f.status for f in fact_sql.list_all(db, "u", include_superseded=True)] == ["active", "active"]


def test_a_near_duplicate_that_says_more_supersedes_as_a_merge(db, llm, backend, embedder):
    two_episodes(
        db, llm, backend, embedder, ["Ann lives in a flat in Paris near the canal."], ["Ann lives in a flat in Paris near the canal too."]
    )
    assert questions(backend) == []  # decided by the embedding, no call
    old, merged = fact_sql.get(db, "u", 1), fact_sql.get(db, "u", 2)
    assert old.status == "superseded" and old.superseded_by == 2 and "merged into F2" in old.superseded_reason
    assert merged.origin == "merge" and merged.source_episode_ids == (1, 2)


def test_the_same_fact_again_only_gains_a_source(db, llm, backend, embedder):
    two_episodes(db, llm, backend, embedder, ["Ann lives in Paris."], ["Ann lives in Paris!"])
    assert backend.prompts_for("Outdated") == []
    (fact,) = fact_sql.list_all(db, "u", include_superseded=True)
    assert fact.source_episode_ids == (1, 2)


def test_facts_about_other_people_are_never_asked_about(db, llm, backend, embedder):
    paris, berlin = "Ann lives in Paris.", "Bob lives in Berlin."
    two_episodes(db, llm, backend, embedder, [paris], [berlin], outdated={(paris, berlin)})
    assert questions(backend) == []
    assert [f.status for f in fact_sql.list_all(db, "u", include_superseded=True)] == ["active", "active"]


def test_a_model_that_fails_the_self_check_retires_nothing(db, llm, backend, embedder):
    paris, berlin = "Ann lives in Paris.", "Ann lives in Berlin."
    world = two_episodes(db, llm, backend, embedder, [paris], [])
    world.answers["Outdated"] = {"outdated": True}  # says yes to everything, as the 0.5B model does
    world.facts = [[berlin]]
    pipe = Pipeline(db, "u", llm, embedder, profile=Profile(facts=True, integrate=False))
    pipe.add_messages(chat(["Ann", "flat", "Paris", "Berlin", "moving"], start=AUTUMN.replace(day=25), tag="third"))
    pipe.process(flush=True)
    assert [f.status for f in fact_sql.list_all(db, "u", include_superseded=True)] == ["active", "active"]
    assert stage(db, "consolidation")["fallbacks"] == 1


def test_an_unusable_answer_keeps_the_fact_and_counts_a_fallback(db, llm, backend, embedder):
    paris, berlin = "Ann lives in Paris.", "Ann lives in Berlin."
    world = World(backend)
    calls = {"n": 0}

    def answer(messages, schema):
        calls["n"] += 1
        if calls["n"] <= 2:  # pass the self-check, then answer nonsense
            return judge(set())(messages, schema)
        return "{broken"

    world.answers["Outdated"] = answer
    world.facts = [[paris], [berlin]]
    pipe = Pipeline(db, "u", llm, embedder, profile=Profile(facts=True, integrate=False))
    pipe.add_messages(chat(["Ann", "Paris", "Berlin"], start=SPRING) + chat(["Ann", "Paris", "Berlin"], start=AUTUMN, tag="x"))
    pipe.process(flush=True)
    assert fact_sql.count(db, "u") == 2
    assert stage(db, "consolidation")["fallbacks"] == 1


def test_naive_rag_appends_without_consolidating(db, llm, backend, embedder):
    paris, berlin = "Ann lives in Paris.", "Ann lives in Berlin."
    two_episodes(
        db,
        llm,
        backend,
        embedder,
        [paris],
        [berlin],
        profile=Profile(memory="naive-rag", facts=True, integrate=False),
        outdated={(paris, berlin)},
    )
    assert backend.prompts_for("Outdated") == []
    assert [f.status for f in fact_sql.list_all(db, "u", include_superseded=True)] == ["active", "active"]


def test_facts_of_one_episode_are_consolidated_against_each_other(db, llm, backend, embedder):
    paris, berlin = "Ann lives in Paris.", "Ann lives in Berlin."
    two_episodes(db, llm, backend, embedder, [paris, berlin], [], outdated={(paris, berlin)})
    assert fact_sql.get(db, "u", 1).superseded_by == 2
