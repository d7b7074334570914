"""The persisted pipeline with fake models: windows, carry-over, flush, resume."""

from datetime import datetime

import pytest

from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import messages as message_sql
from nemori_cli.store import telemetry
from tests.conftest import make_messages


def narrative_answer(messages, schema):
    text = messages[-1]["content"]
    return {"title": "Ann and Bob talk", "narrative": f"Ann and Bob talked on 8 May 2023. ({len(text)} chars seen)"}


def scripted(backend):
    """Boundaries: none; narratives: a fixed valid answer."""

    def answer(messages, schema):
        if schema["title"] == "Partition":
            return {"boundaries": []}
        return narrative_answer(messages, schema)

    backend.default = answer


def test_store_is_idempotent(db, llm, embedder):
    pipe = Pipeline(db, "u", llm, embedder)
    msgs = make_messages(7)
    assert pipe.add_messages(msgs) == 7
    assert pipe.add_messages(msgs) == 0
    assert message_sql.count_pending(db, "u") == 7


def test_identical_idless_messages_are_kept_apart_but_stable(db, llm, embedder):
    from dataclasses import replace

    base = make_messages(1)[0]
    twice = [replace(base, source_id=None), replace(base, source_id=None)]
    pipe = Pipeline(db, "u", llm, embedder)
    assert pipe.add_messages(twice) == 2
    assert pipe.add_messages(twice) == 0


def test_full_windows_leave_a_short_tail_pending_without_flush(db, llm, backend, embedder):
    scripted(backend)
    pipe = Pipeline(db, "u", llm, embedder, window=10)
    pipe.add_messages(make_messages(25))
    report = pipe.process(flush=False)
    assert report.pending == 5
    assert episode_sql.count(db, "u") >= 2
    report = pipe.process(flush=True)
    assert report.pending == 0
    owned = [m.episode_id for m in message_sql.all_messages(db, "u")]
    assert None not in owned


def test_every_message_lands_in_exactly_one_episode(db, llm, backend, embedder):
    scripted(backend)
    pipe = Pipeline(db, "u", llm, embedder, window=8)
    pipe.add_messages(make_messages(30))
    pipe.process(flush=True)
    eps = episode_sql.list_all(db, "u", with_messages=True)
    ids = [m.id for e in eps for m in e.messages]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 30


def test_last_group_of_a_full_window_is_carried_over(db, llm, backend, embedder):
    answers = iter([{"boundaries": [7]}])

    def answer(messages, schema):
        if schema["title"] == "Partition":
            return next(answers, {"boundaries": []})
        return narrative_answer(messages, schema)

    backend.default = answer
    pipe = Pipeline(db, "u", llm, embedder, window=10)
    pipe.add_messages(make_messages(10))
    pipe.process(flush=False)
    # messages 7..10 might continue: they wait for more input
    assert message_sql.count_pending(db, "u") == 4
    assert episode_sql.count(db, "u") == 1


def test_narratives_get_absolute_dates_and_episode_times(db, llm, backend, embedder):
    def answer(messages, schema):
        if schema["title"] == "Partition":
            return {"boundaries": []}
        return {"title": "Gym", "narrative": "Ann went to the gym yesterday."}

    backend.default = answer
    pipe = Pipeline(db, "u", llm, embedder)
    pipe.add_messages(make_messages(5))
    pipe.process(flush=True)
    (ep,) = episode_sql.list_all(db, "u")
    assert "7 May 2023" in ep.narrative  # "yesterday" of 8 May
    assert ep.start == datetime(2023, 5, 8, 13, 0)
    kinds = {(s["stage"], s["repaired"]) for s in telemetry.stage_stats(db, "u")}
    assert ("narration", 1) in kinds


def test_unusable_narration_falls_back_to_the_messages_and_is_counted(db, llm, backend, embedder):
    def answer(messages, schema):
        return {"boundaries": []} if schema["title"] == "Partition" else "{oops"

    backend.default = answer
    pipe = Pipeline(db, "u", llm, embedder)
    pipe.add_messages(make_messages(5))
    pipe.process(flush=True)
    (ep,) = episode_sql.list_all(db, "u")
    assert "topic message 0" in ep.narrative and "8 May 2023" in ep.narrative
    (stage,) = [s for s in telemetry.stage_stats(db, "u") if s["stage"] == "narration"]
    assert stage["fallbacks"] == 1 and stage["failed"] == 1


def test_interrupt_mid_window_loses_nothing_and_resumes(db, llm, backend, embedder):
    calls = {"n": 0}

    def answer(messages, schema):
        if schema["title"] == "Partition":
            return {"boundaries": [6]}
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return narrative_answer(messages, schema)

    backend.default = answer
    pipe = Pipeline(db, "u", llm, embedder, window=10)
    pipe.add_messages(make_messages(10))
    with pytest.raises(KeyboardInterrupt):
        pipe.process(flush=True)
    assert episode_sql.count(db, "u") == 0
    assert message_sql.count_pending(db, "u") == 10
    llm.log.drain()
    pipe.process(flush=True)
    assert message_sql.count_pending(db, "u") == 0
    assert episode_sql.count(db, "u") == 2


def test_users_are_isolated(db, llm, backend, embedder):
    scripted(backend)
    for user, topic in (("alice", "sailing"), ("bob", "sailing")):
        pipe = Pipeline(db, user, llm, embedder)
        pipe.add_messages(make_messages(5, topic=topic))
        pipe.process(flush=True)
    from nemori_cli.retrieval.search import search

    hits, _ = search(db, "alice", embedder, "sailing message")
    assert hits and all(h.id in {e.id for e in episode_sql.list_all(db, "alice")} for h in hits)
    assert episode_sql.get(db, "alice", episode_sql.list_all(db, "bob")[0].id) is None
