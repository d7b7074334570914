"""Which turns found by meaning alone may anchor a window (retrieval/anchors.py), and what search does with it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemori_cli.retrieval import anchors
from nemori_cli.retrieval.search import PROFILES, search
from tests.unit.asof_world import build

QUESTION = "When Gina has lost her job at Door Dash?"


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ("Can't wait too!", False),
        ("See you tomorrow. Bye!", False),
        ("That's the spirit! Bye!", False),
        ("Wow, that's awesome! Can't wait to hear it!", False),
        # Something said: four words of substance, or a word of the question's.
        ("My online clothes store opened after months of planning", True),
        ("Since I lost my job, things have been tough", True),  # "lost", "job": the question's words
        # Three words of substance ("dashboard", "shows", "numbers"), none of the question's ("dashb" is not "dash").
        ("The dashboard shows numbers", False),
    ],
)
def test_a_line_found_by_meaning_alone_must_say_something(line, kept):
    assert anchors.says_something(QUESTION, line, 4) is kept


def test_zero_keeps_every_line():
    assert anchors.says_something(QUESTION, "Bye!", 0)


@given(st.text(max_size=200), st.integers(min_value=0, max_value=6))
def test_more_words_of_substance_never_drop_a_line_a_lower_bar_keeps(text, bar):
    # Monotone in the bar: a line kept at a higher bar is kept at every lower one.
    if anchors.says_something("What did Ann plant?", text, bar + 1):
        assert anchors.says_something("What did Ann plant?", text, bar)


def test_search_with_an_anchor_bar_drops_only_lines_found_by_meaning_alone_that_say_nothing(db, llm, backend, embedder, monkeypatch):
    from datetime import datetime

    from nemori_cli.domain import IncomingMessage
    from nemori_cli.pipeline.runner import Pipeline
    from nemori_cli.store import message_index
    from nemori_cli.store import messages as message_sql

    build(db, llm, backend, embedder)
    farewells = [
        IncomingMessage(speaker="Bob", content=text, timestamp=datetime(2024, 7, 1, 9, i), source_id=f"bye{i}")
        for i, text in enumerate(["Can't wait too!", "See you tomorrow. Bye!"])
    ]
    Pipeline(db, "u", llm, embedder).add_messages(farewells)  # stored and searchable, not built
    junk = [m.id for m in message_sql.all_messages(db, "u") if m.source_id.startswith("bye")]
    assert len(junk) == 2
    found_by_meaning = message_index.vector_search

    def farewells_first(db_, user, query, k, *, as_of=None, reads_after=False):  # MiniLM puts short lines near any question
        return [(i, 0.9) for i in junk] + [
            hit for hit in found_by_meaning(db_, user, query, k, as_of=as_of, reads_after=reads_after) if hit[0] not in junk
        ]

    monkeypatch.setattr(message_index, "vector_search", farewells_first)
    options = replace(PROFILES["budget"], facts=0, budget=0)
    question = "Where does Ann live? Berlin"
    plain, _ms = search(db, "u", embedder, question, options)
    barred, _ms = search(db, "u", embedder, question, replace(options, anchor_words=4))
    assert {h.id for h in plain} >= set(junk)  # without the bar, the farewells anchor windows
    assert {h.id for h in plain} - {h.id for h in barred} == set(junk)  # with it, they alone go
    # Every line found by words stays, in the same order.
    assert [h.id for h in plain if h.text_rank is not None] == [h.id for h in barred if h.text_rank is not None]
