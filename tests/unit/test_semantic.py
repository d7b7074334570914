"""Semantic memory by prediction error, with fake models: each branch, and what is stored."""

from __future__ import annotations

from nemori_cli.memory.profile import Profile
from nemori_cli.memory.semantic import ungrounded
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import telemetry
from tests.conftest import make_messages
from tests.support.scripted import scripted


def ingest(db, llm, embedder, n=5, topic="sailing"):
    pipe = Pipeline(db, "u", llm, embedder)
    pipe.add_messages(make_messages(n, topic=topic))
    return pipe.process(flush=True)


def test_first_episode_has_nothing_to_predict_from_so_no_prediction_call(db, llm, backend, embedder):
    scripted(backend, facts=[["Ann owns a sailing boat."]])
    report = ingest(db, llm, embedder)
    assert backend.prompts_for("Prediction") == []
    (distill_prompt,) = backend.prompts_for("Distilled")
    assert "nothing: memory knows nothing related yet" in distill_prompt[-1]["content"]
    (fact,) = fact_sql.list_all(db, "u")
    assert report.facts == 1 and fact.source_episode_ids == (1,)


def test_evoked_facts_drive_a_prediction_that_the_distillation_sees(db, llm, backend, embedder):
    known = "On 8 May 2023 Ann talked about sailing with Bob."  # close to the next episode's text
    scripted(backend, facts=[[known], ["Ann sailed to Malta."]], prediction="PREDICTED-TEXT")
    ingest(db, llm, embedder, topic="sailing")
    ingest(db, llm, embedder, topic="more-sailing")
    (predict_prompt,) = backend.prompts_for("Prediction")
    assert known in predict_prompt[-1]["content"]
    assert "PREDICTED-TEXT" in backend.prompts_for("Distilled")[-1][-1]["content"]


def test_threshold_is_applied_as_cosine_similarity(db, llm, backend, embedder):
    scripted(backend, facts=[["Zed collects rare postage stamps from Peru."], []])
    ingest(db, llm, embedder, topic="sailing")
    ingest(db, llm, embedder, topic="cooking")
    assert backend.prompts_for("Prediction") == []  # unrelated fact: similarity below 0.70


def test_invented_names_are_dropped_and_counted(db, llm, backend, embedder):
    scripted(backend, facts=[["Ann met Gandalf in Mordor.", "Bob enjoys sailing message chats."]])
    ingest(db, llm, embedder)
    assert [f.text for f in fact_sql.list_all(db, "u")] == ["Bob enjoys sailing message chats."]
    stage = next(s for s in telemetry.stage_stats(db, "u") if s["stage"] == "distillation")
    assert stage["repaired"] == 1
    assert ungrounded("Ann met Gandalf on Monday.", "ann said hi") == ["Gandalf"]


def test_relative_times_in_facts_get_their_dates(db, llm, backend, embedder):
    scripted(backend, facts=[["Ann went sailing yesterday."]])
    ingest(db, llm, embedder)
    assert fact_sql.list_all(db, "u")[0].text == "Ann went sailing yesterday [7 May 2023]."


def test_unusable_distillation_keeps_the_episode_and_counts_a_fallback(db, llm, backend, embedder):
    def answer(messages, schema):
        if schema["title"] == "Partition":
            return {"boundaries": []}
        if schema["title"] == "Narrative":
            return {"title": "Ann sails", "narrative": "On 8 May 2023 Ann talked."}
        return "{broken"

    backend.default = answer
    report = ingest(db, llm, embedder)
    assert report.episodes == 1 and report.facts == 0
    stage = next(s for s in telemetry.stage_stats(db, "u") if s["stage"] == "distillation")
    assert stage["fallbacks"] == 1 and stage["failed"] == 1


def test_episodic_only_pipeline_makes_no_semantic_calls(db, llm, backend, embedder):
    scripted(backend, facts=[["Ann owns a boat."]])
    pipe = Pipeline(db, "u", llm, embedder, profile=Profile(facts=False))
    pipe.add_messages(make_messages(5))
    pipe.process(flush=True)
    assert backend.prompts_for("Distilled") == [] and fact_sql.count(db, "u") == 0


def test_search_returns_facts_with_provenance_and_never_another_users(db, llm, backend, embedder):
    from nemori_cli.retrieval.search import SearchOptions, search

    scripted(backend, facts=[["Ann owns a sailing boat."], ["Bob owns a sailing boat."]])
    ingest(db, llm, embedder)
    other = Pipeline(db, "other", llm, embedder)
    other.add_messages(make_messages(5, topic="sailing"))
    other.process(flush=True)
    hits, _ = search(db, "u", embedder, "who owns a sailing boat", SearchOptions(k=5, facts=5))
    facts = [h for h in hits if h.kind == "fact"]
    assert [h.text for h in facts] == ["Ann owns a sailing boat."]
    assert facts[0].start.isoformat() == "2023-05-08T13:00:00"  # its source episode's time
    hits, _ = search(db, "u", embedder, "who owns a sailing boat", SearchOptions(k=5, facts=0))
    assert all(h.kind == "episode" for h in hits)


def test_answer_prompt_lists_facts_after_citable_episodes(db, llm, backend, embedder):
    from nemori_cli.retrieval.answer import ask
    from nemori_cli.retrieval.search import PROFILES

    scripted(backend, facts=[["Ann owns a sailing boat."]])
    ingest(db, llm, embedder)
    backend.responses = [{"answer": "a boat", "sources": [1]}]
    answer, cited = ask(db, "u", embedder, llm, "What does Ann own?", PROFILES["paper"])
    prompt = backend.history[-1][0][-1]["content"]
    assert (
        "Facts:\n- (8 May 2023) Ann owns a sailing boat." in prompt and "13:00" not in prompt
    )  # dates only: a clock time invites clock-time answers
    items = backend.history[-1][1]["properties"]["sources"]["items"]
    assert items.get("enum", [items.get("const")]) == [1]  # only episodes are citable
    assert answer.answer == "a boat" and cited == [1]
