"""A fact as a pointer to its turn (retrieval/fact_turns.py): what it points at, and what search shows with facts_as="turn"."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest

from nemori_cli import Memory
from nemori_cli.domain import Message
from nemori_cli.errors import ConfigError
from nemori_cli.retrieval import fact_turns
from nemori_cli.retrieval.search import PROFILES, search
from tests.unit.asof_world import BERLIN, build


def _message(i: int, speaker: str, content: str) -> Message:
    return Message(i, "u", f"k{i}", speaker, content, datetime(2024, 3, 5, 9, i), f"s{i}", "one")


def test_the_turn_that_shares_most_of_the_facts_words_is_its_source():
    turns = [
        _message(1, "Evan", "Morning Sam!"),
        _message(2, "Evan", "Our family motto is 'Bring it on home', my dad says it every day."),
        _message(3, "Sam", "Love that motto."),
    ]
    assert fact_turns.source_turn("Evan's family motto is 'Bring it on Home'.", turns).id == 2
    # The speaker's name counts: the same words said by two people, the fact names who.
    said_twice = [_message(1, "Sam", "I went kayaking at Lake Tahoe"), _message(2, "Evan", "I went kayaking at Lake Tahoe")]
    assert fact_turns.source_turn("Evan went kayaking at Lake Tahoe.", said_twice).id == 2
    # On a tie the earlier turn; no shared word, no source.
    assert fact_turns.source_turn("Sam went kayaking.", [_message(4, "Ann", "kayaking!"), _message(5, "Bob", "kayaking!")]).id == 4
    assert fact_turns.source_turn("Evan likes chess.", turns) is None


def test_search_shows_each_fact_as_its_turn_with_neighbours(db, llm, backend, embedder):
    build(db, llm, backend, embedder)
    options = PROFILES["budget"]
    as_text, _ms = search(db, "u", embedder, "Where does Ann live? Berlin", options)
    assert any(h.kind == "fact" and h.text == BERLIN for h in as_text)
    as_turns, _ms = search(db, "u", embedder, "Where does Ann live? Berlin", replace(options, facts_as="turn"))
    assert as_turns and {h.kind for h in as_turns} == {"message"}
    # Each turn once, and with the turns either side of it (two), as a found turn is shown.
    assert len({h.id for h in as_turns}) == len(as_turns)
    assert all(1 < len(h.messages) <= 5 and any(m.id == h.id for m in h.messages) for h in as_turns)
    # The Berlin fact's turn is there: a June line that says Berlin.
    assert any("Berlin" in m.content and m.timestamp.month == 6 for h in as_turns for m in h.messages if m.id == h.id)


def test_a_turn_found_both_ways_keeps_the_better_score(db, llm, backend, embedder):
    build(db, llm, backend, embedder)
    berlin = next(h for h in search(db, "u", embedder, "Berlin", PROFILES["budget"])[0] if h.text == BERLIN)
    (turn,) = fact_turns.as_turns(db, "u", [berlin], [], neighbours=2)
    assert turn.kind == "message" and turn.score == berlin.score and "Berlin" in turn.text
    weaker, stronger = replace(turn, score=berlin.score / 2), replace(turn, score=berlin.score * 2)
    assert [(h.id, h.score) for h in fact_turns.as_turns(db, "u", [berlin], [weaker], neighbours=2)] == [(turn.id, berlin.score)]
    assert [(h.id, h.score) for h in fact_turns.as_turns(db, "u", [berlin], [stronger], neighbours=2)] == [(turn.id, stronger.score)]


def test_an_unknown_facts_as_is_refused(tmp_path):
    with Memory(tmp_path / "m.db", user="u") as memory, pytest.raises(ConfigError, match="facts_as='quotes'"):
        memory.search("anything", facts_as="quotes")


def test_facts_as_rank_shows_turns_only_and_lifts_the_turn_a_fact_points_at(db, llm, backend, embedder):
    build(db, llm, backend, embedder)
    question = "Where does Ann live? Berlin"
    options = PROFILES["budget"]
    berlin = next(h for h in search(db, "u", embedder, question, options)[0] if h.text == BERLIN)
    ((_fact, pointed),) = fact_turns.pointed(db, "u", [berlin])
    plain, _ms = search(db, "u", embedder, question, replace(options, facts=0))
    voted, _ms = search(db, "u", embedder, question, replace(options, facts_as="rank"))
    assert voted and {h.kind for h in voted} == {"message"}  # the facts vote; none is shown
    assert len({h.id for h in voted}) == len(voted)
    before = next((h.score for h in plain if h.id == pointed.id), 0.0)
    after = next(h.score for h in voted if h.id == pointed.id)
    assert after > before  # the Berlin fact's vote is added to what meaning and words gave its turn
    # A turn no fact points at keeps the score it had.
    others = {h.id: h.score for h in plain if h.id != pointed.id}
    assert all(others[h.id] == pytest.approx(h.score) for h in voted if h.id in others)


def test_pointed_keeps_each_turn_once_with_its_best_fact(db, llm, backend, embedder):
    build(db, llm, backend, embedder)
    berlin = next(h for h in search(db, "u", embedder, "Berlin", PROFILES["budget"])[0] if h.text == BERLIN)
    weaker = replace(berlin, score=berlin.score / 2)
    ((fact, turn),) = fact_turns.pointed(db, "u", [weaker, berlin])
    assert fact.score == berlin.score and "Berlin" in turn.content
    # A fact's turn said after the moment asked about is not pointed at.
    assert fact_turns.pointed(db, "u", [berlin], as_of=datetime(2000, 1, 1)) == []
