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


CHAT = [
    _said(0, "Ann", "I adopted a puppy last week"),
    _said(1, "Bob", "Yeah, it's special to me."),
    _said(2, "Ann", "We named him Biscuit"),
]


def test_neighbours_vector_reads_the_turn_before_and_after_in_its_session(db, llm, embedder):
    Pipeline(db, "u", llm, embedder, profile=NEIGHBOURS).add_messages([*CHAT, _said(3, "Cy", "Unrelated other chat", session="s2")])
    ids = _ids(db, "u")
    middle = _expected(
        embedder,
        "Ann: I adopted a puppy last week",
        "Bob: Yeah, it's special to me.",
        "Ann: We named him Biscuit",
        own="Bob: Yeah, it's special to me.",
    )
    assert _stored_similarity(db, "u", middle, ids["Yeah, it's special to me."]) == pytest.approx(1.0, abs=1e-5)
    # The last turn of s1 has nothing after it; s2's turn, said after it, is another session's and is not read.
    last = _expected(embedder, "Bob: Yeah, it's special to me.", "Ann: We named him Biscuit", own="Ann: We named him Biscuit")
    assert _stored_similarity(db, "u", last, ids["We named him Biscuit"]) == pytest.approx(1.0, abs=1e-5)
    assert stored(db).turn_vectors == "neighbours"


def test_a_turn_alone_is_the_shipped_vector(db, llm, embedder):
    Pipeline(db, "u", llm, embedder).add_messages(CHAT)
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
    after = _expected(
        embedder,
        "Ann: I adopted a puppy last week",
        "Bob: Yeah, it's special to me.",
        "Ann: We named him Biscuit",
        own="Bob: Yeah, it's special to me.",
    )
    assert _stored_similarity(db, "u", after, ids["Yeah, it's special to me."]) == pytest.approx(1.0, abs=1e-5)
    assert db.one("SELECT count(*) AS n FROM message_fts WHERE user_id = 'u'")["n"] == 3  # text rows not doubled
    # The first turn's "after" neighbour was already there when it was indexed: it is unchanged.
    first = _expected(
        embedder, "Ann: I adopted a puppy last week", "Bob: Yeah, it's special to me.", own="Ann: I adopted a puppy last week"
    )
    assert _stored_similarity(db, "u", first, ids["I adopted a puppy last week"]) == pytest.approx(1.0, abs=1e-5)


def test_forgetting_a_turn_takes_its_words_out_of_the_neighbours_vectors(db, llm, embedder):
    Pipeline(db, "u", llm, embedder, profile=NEIGHBOURS).add_messages(CHAT)
    ids = _ids(db, "u")
    with db.transaction():
        draft = episode_sql.EpisodeDraft(
            "puppy", "Ann adopted a puppy", datetime(2024, 3, 1), datetime(2024, 3, 1), "model", (ids["I adopted a puppy last week"],)
        )
        episode = episode_sql.add(db, "u", draft, embedder.embed_query("Ann adopted a puppy"))
    turns = message_index.TurnVectors(embedder.embed_documents, max_chars(embedder), "neighbours")
    with db.transaction():
        counts = forget.forget_episode(db, "u", episode, turns=turns)
    assert counts["messages"] == 1
    survivor = ids["Yeah, it's special to me."]
    now = _expected(embedder, "Bob: Yeah, it's special to me.", "Ann: We named him Biscuit", own="Bob: Yeah, it's special to me.")
    assert _stored_similarity(db, "u", now, survivor) == pytest.approx(1.0, abs=1e-5)
    old = _expected(
        embedder,
        "Ann: I adopted a puppy last week",
        "Bob: Yeah, it's special to me.",
        "Ann: We named him Biscuit",
        own="Bob: Yeah, it's special to me.",
    )
    assert _stored_similarity(db, "u", old, survivor) < 0.99


def test_a_memory_keeps_the_turn_vectors_it_was_made_with(db, llm, embedder):
    Pipeline(db, "u", llm, embedder, profile=NEIGHBOURS).add_messages(CHAT)
    assert method.resolve(db, {"facts": None}).turn_vectors == "neighbours"  # inherited, not reset to the default
    assert DEFAULT.turn_vectors == "turn"


def test_an_unknown_turn_vector_kind_is_refused(db):
    with pytest.raises(ConfigError, match="turn vectors 'sideways'"):
        method.resolve(db, {"turn_vectors": "sideways"})
