"""A raw turn's search vector (store/message_index.vectors_for): the turn alone, or the turn plus the turn read with
its neighbours, kept right when neighbours arrive later or are forgotten."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from nemori_cli.domain import IncomingMessage
from nemori_cli.embed.base import max_chars
from nemori_cli.errors import ConfigError
from nemori_cli.memory import method
from nemori_cli.memory.profile import DEFAULT, Profile, stored
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import forget, message_index
from nemori_cli.store import messages as message_sql

NEIGHBOURS = Profile(facts=True, turn_vectors="neighbours")


def _said(minute: int, speaker: str, text: str, session: str = "s1") -> IncomingMessage:
    return IncomingMessage(
        speaker=speaker, content=text, timestamp=datetime(2024, 3, 1, 9, minute), source_id=f"{session}:{minute}", session=session
    )


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _expected(embedder, *window: str, own: str) -> np.ndarray:
    """The neighbours vector of the turn ``own`` read inside ``window`` (each "Speaker: text")."""
    alone, together = embedder.embed_documents([own, "\n".join(window)])
    return _unit(alone + together)


def _stored_similarity(db, user: str, vector: np.ndarray, message_id: int) -> float:
    """Cosine similarity between ``vector`` and the stored vector of ``message_id`` (via the index itself)."""
    found = dict(message_index.vector_search(db, user, vector, 50))
    return found[message_id]


def _ids(db, user: str) -> dict[str, int]:
    return {m.content: m.id for m in message_sql.all_messages(db, user)}


LINES = ("Ann: I adopted a puppy last week", "Bob: Yeah, it's special to me.", "Ann: We named him Biscuit")  # CHAT as embedded
CHAT = [
    _said(0, "Ann", "I adopted a puppy last week"),
    _said(1, "Bob", "Yeah, it's special to me."),
    _said(2, "Ann", "We named him Biscuit"),
]


def test_neighbours_vector_reads_the_turn_before_and_after_in_its_session(db, llm, embedder):
    Pipeline(db, "u", llm, embedder, profile=NEIGHBOURS).add_messages([*CHAT, _said(3, "Cy", "Unrelated other chat", session="s2")])
    ids = _ids(db, "u")
    middle = _expected(embedder, *LINES, own=LINES[1])
    assert _stored_similarity(db, "u", middle, ids["Yeah, it's special to me."]) == pytest.approx(1.0, abs=1e-5)
    # The last turn of s1 has nothing after it; s2's turn, said after it, is another session's and is not read.
    last = _expected(embedder, "Bob: Yeah, it's special to me.", "Ann: We named him Biscuit", own="Ann: We named him Biscuit")
    assert _stored_similarity(db, "u", last, ids["We named him Biscuit"]) == pytest.approx(1.0, abs=1e-5)
    assert stored(db).turn_vectors == "neighbours"


def test_a_turn_alone_is_the_vector_of_turn_vectors_turn(db, llm, embedder):
    Pipeline(db, "u", llm, embedder, profile=Profile(facts=True, turn_vectors="turn")).add_messages(CHAT)
    ids = _ids(db, "u")
    alone = embedder.embed_documents(["Bob: Yeah, it's special to me."])[0]
    assert _stored_similarity(db, "u", alone, ids["Yeah, it's special to me."]) == pytest.approx(1.0, abs=1e-5)
    assert stored(db).turn_vectors == "turn"


def test_a_turn_said_later_makes_its_neighbours_vector_again(db, llm, embedder):
    pipeline = Pipeline(db, "u", llm, embedder, profile=NEIGHBOURS)
    pipeline.add_messages(CHAT[:2])
    ids = _ids(db, "u")
    before = _expected(embedder, "Ann: I adopted a puppy last week", "Bob: Yeah, it's special to me.", own="Bob: Yeah, it's special to me.")
    assert _stored_similarity(db, "u", before, ids["Yeah, it's special to me."]) == pytest.approx(1.0, abs=1e-5)

    pipeline.add_messages(CHAT[2:])  # the next ingest: the reply arrives
    after = _expected(embedder, *LINES, own=LINES[1])
    assert _stored_similarity(db, "u", after, ids["Yeah, it's special to me."]) == pytest.approx(1.0, abs=1e-5)
    assert db.one("SELECT count(*) AS n FROM message_fts WHERE user_id = 'u'")["n"] == 3  # text rows not doubled


def test_an_older_line_imported_late_makes_both_its_neighbours_vectors_again(db, llm, embedder):
    pipeline = Pipeline(db, "u", llm, embedder, profile=NEIGHBOURS)
    pipeline.add_messages([CHAT[0], CHAT[2]])
    pipeline.add_messages([CHAT[1]])  # said between them, ingested last
    ids = _ids(db, "u")
    lines = ("Ann: I adopted a puppy last week", "Bob: Yeah, it's special to me.", "Ann: We named him Biscuit")
    first = _expected(embedder, *lines[:2], own=lines[0])
    last = _expected(embedder, *lines[1:], own=lines[2])
    assert _stored_similarity(db, "u", first, ids["I adopted a puppy last week"]) == pytest.approx(1.0, abs=1e-5)
    assert _stored_similarity(db, "u", last, ids["We named him Biscuit"]) == pytest.approx(1.0, abs=1e-5)


def test_forgetting_a_turn_takes_its_words_out_of_the_neighbours_vectors(db, llm, embedder):
    Pipeline(db, "u", llm, embedder, profile=NEIGHBOURS).add_messages(CHAT)
    ids = _ids(db, "u")
    with db.transaction():
        draft = episode_sql.EpisodeDraft(
            "puppy", "Ann adopted a puppy", datetime(2024, 3, 1), datetime(2024, 3, 1), "model", (ids["I adopted a puppy last week"],)
        )
        episode = episode_sql.add(db, "u", draft, embedder.embed_query("Ann adopted a puppy"))
    turns = message_index.TurnVectors(embedder.embed_documents, lambda: max_chars(embedder), "neighbours")
    with db.transaction():
        counts = forget.forget_episode(db, "u", episode, turns=turns)
    assert counts["messages"] == 1
    survivor = ids["Yeah, it's special to me."]
    now = _expected(embedder, "Bob: Yeah, it's special to me.", "Ann: We named him Biscuit", own="Bob: Yeah, it's special to me.")
    assert _stored_similarity(db, "u", now, survivor) == pytest.approx(1.0, abs=1e-5)
    old = _expected(embedder, *LINES, own=LINES[1])
    assert _stored_similarity(db, "u", old, survivor) < 0.99


def test_a_memory_keeps_the_turn_vectors_it_was_made_with(db, llm, embedder):
    Pipeline(db, "u", llm, embedder, profile=NEIGHBOURS).add_messages(CHAT[:2])
    kept = method.resolve(db, {"facts": None})
    assert kept.turn_vectors == "neighbours" != DEFAULT.turn_vectors  # inherited, not a new memory's default
    with pytest.raises(ConfigError, match="Mixing methods"):
        method.resolve(db, {"turn_vectors": "turn"})


def test_a_memory_recorded_before_turn_vectors_existed_keeps_embedding_turns_alone(db, llm, embedder):
    import json

    with db.transaction():  # the profile as an older nemori wrote it: no turn_vectors field
        db.set_meta("profile", json.dumps({"memory": "native", "distill": "prediction", "integrate": True, "facts": True}))
    profile = method.resolve(db, {})
    assert profile.turn_vectors == "turn"
    Pipeline(db, "u", llm, embedder, profile=profile).add_messages(CHAT)
    alone = embedder.embed_documents(["Bob: Yeah, it's special to me."])[0]
    assert _stored_similarity(db, "u", alone, _ids(db, "u")["Yeah, it's special to me."]) == pytest.approx(1.0, abs=1e-5)


def test_a_long_turn_before_never_pushes_the_turn_out_of_its_window():
    from hypothesis import given
    from hypothesis import strategies as st

    @given(st.integers(0, 3000), st.integers(1, 900), st.integers(0, 3000), st.integers(60, 1200))
    def check(before, own, after, limit):
        said = [_message(i, "x" * n) for i, n in enumerate((before, own, after))]
        text = message_index.window_text(said, said[1], limit)
        assert len(text) <= limit
        assert message_index.embedding_text(said[1], limit) in text

    check()


def _message(i: int, content: str):
    from nemori_cli.domain import Message

    return Message(i + 1, "u", str(i), f"S{i}", content, datetime(2024, 3, 1, 9, i), None, "s1")


def test_an_as_of_search_does_not_rank_a_turn_by_the_line_said_after_the_cutoff(db, llm, embedder):
    Pipeline(db, "u", llm, embedder, profile=NEIGHBOURS).add_messages([*CHAT, _said(5, "Cy", "Other chat, later", session="s2")])
    ids = _ids(db, "u")
    cutoff = datetime(2024, 3, 1, 9, 1, 30)  # after "Yeah, it's special to me.", before "We named him Biscuit"
    query = embedder.embed_query("puppy Biscuit")
    shown = {i for i, _ in message_index.vector_search(db, "u", query, 10, as_of=cutoff, reads_after=True)}
    assert shown == {ids["I adopted a puppy last week"]}  # its next line was said by then; the reply's was not
    plain = {i for i, _ in message_index.vector_search(db, "u", query, 10, as_of=cutoff)}
    assert plain == {ids["I adopted a puppy last week"], ids["Yeah, it's special to me."]}
    later = {i for i, _ in message_index.vector_search(db, "u", query, 10, as_of=datetime(2024, 3, 2), reads_after=True)}
    assert later == set(ids.values())  # each session's last line has nothing after it


def test_forgetting_loads_no_model_until_a_neighbour_must_be_embedded_again(db, llm, embedder):
    from nemori_cli.services.forget import _embedders

    Pipeline(db, "u", llm, embedder, profile=NEIGHBOURS).add_messages(CHAT)

    class NoModelYet:
        @property
        def embedder(self):
            raise AssertionError("the embedder was loaded")

    extra = _embedders(NoModelYet(), db)
    assert extra["turns"].how == "neighbours"
    with db.transaction():
        extra["turns"].refresh(db, "u", [])  # nothing to embed again: no model


def test_an_unknown_turn_vector_kind_is_refused(db):
    with pytest.raises(ConfigError, match="turn vectors 'sideways'"):
        method.resolve(db, {"turn_vectors": "sideways"})


def test_turns_asked_for_by_number_are_that_many_either_side(monkeypatch):
    from dataclasses import replace

    from nemori_cli.retrieval.search import PROFILES
    from nemori_cli.services.answer import search_options

    # A profile with its own count before a found turn (the bench's b1a2 rows; none that `ask` ships today).
    monkeypatch.setitem(PROFILES, "core", replace(PROFILES["core"], turns=2, turns_before=1))
    assert search_options("core", None, {}).turns_before == 1
    asked = search_options("core", None, {"turns": 3})
    assert (asked.turns, asked.turns_before) == (3, -1)  # -1: as many before as after
    assert search_options("core", None, {"turns": 3, "turns_before": 0}).turns_before == 0


@pytest.mark.parametrize("how", ["turn", "neighbours"])
def test_an_amem_memory_keeps_its_turn_vectors(db, how):
    profile = method.resolve(db, {"memory": "amem", "turn_vectors": how})
    assert (profile.memory, profile.turn_vectors) == ("amem", how)


def test_forgetting_a_note_takes_its_message_out_of_the_neighbours_vectors(db, llm, embedder):
    from nemori_cli.store import notes as note_sql

    Pipeline(db, "u", llm, embedder, profile=Profile(memory="amem", turn_vectors="neighbours")).add_messages(CHAT)
    ids = _ids(db, "u")
    with db.transaction():
        note = note_sql.add(
            db,
            "u",
            content="I adopted a puppy last week",
            ts=datetime(2024, 3, 1, 9, 0),
            keywords=["puppy"],
            tags=[],
            context="",
            embedding=embedder.embed_query("puppy"),
            message_id=ids["I adopted a puppy last week"],
        )
    turns = message_index.TurnVectors(embedder.embed_documents, lambda: max_chars(embedder), "neighbours")
    with db.transaction():
        counts = forget.forget_note(db, "u", note, turns=turns)
    assert counts["messages"] == 1
    now = _expected(embedder, *LINES[1:], own=LINES[1])
    assert _stored_similarity(db, "u", now, ids["Yeah, it's special to me."]) == pytest.approx(1.0, abs=1e-5)


def test_the_days_a_question_names_follow_the_same_as_of_rule(db, llm, embedder):
    from nemori_cli.domain import to_epoch

    Pipeline(db, "u", llm, embedder, profile=NEIGHBOURS).add_messages(CHAT)
    ids = _ids(db, "u")
    cutoff = datetime(2024, 3, 1, 9, 1, 30)
    day = [(to_epoch(datetime(2024, 3, 1)), to_epoch(datetime(2024, 3, 2)))]
    query = embedder.embed_query("puppy")
    ranked = message_index.vector_search_between(db, "u", query, 10, day, as_of=cutoff, reads_after=True)
    assert {i for i, _ in ranked} == {ids["I adopted a puppy last week"]}
    plain = message_index.vector_search_between(db, "u", query, 10, day, as_of=cutoff)
    assert {i for i, _ in plain} == {ids["I adopted a puppy last week"], ids["Yeah, it's special to me."]}
