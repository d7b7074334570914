"""The days a question names, read as spans of conversation time (retrieval/question_dates.py), and the short road's
option that lets them vote for the turns said then (SearchOptions.date_vote), off by default and offered as bench rows."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemori_cli.bench import catalog
from nemori_cli.errors import ConfigError
from nemori_cli.retrieval.question_dates import DAY_BEFORE, WEEK_AFTER, named_dates, spans
from nemori_cli.retrieval.search import PROFILES


def _read(text: str) -> list[tuple[int | None, int, int | None, str]]:
    return [(d.year, d.month, d.day, text[d.start : d.end]) for d in named_dates(text)]


@pytest.mark.parametrize(
    "question, expected",
    [
        ("Who did Maria have dinner with on May 3, 2023?", [(2023, 5, 3, "May 3, 2023")]),
        ("What was the pet's name, said on 3 June, 2023?", [(2023, 6, 3, "3 June, 2023")]),
        ("What book did Tim finish on 8th December, 2023?", [(2023, 12, 8, "8th December, 2023")]),
        ("Where was the picture shared on December 1,2023 taken?", [(2023, 12, 1, "December 1,2023")]),
        ("What did Maria donate in December 2023?", [(2023, 12, None, "December 2023")]),
        ("When did Melanie go camping in June?", [(None, 6, None, "June")]),
        ("What happened in Sept. 2022?", [(2022, 9, None, "Sept. 2022")]),
        ("What did they give him when they met on Aug 15th?", [(None, 8, 15, "Aug 15th")]),
        # a day without its year takes the next full date's, as English leaves it out
        ("Where was John between August 11 and August 15 2023?", [(2023, 8, 11, "August 11"), (2023, 8, 15, "August 15 2023")]),
        ("on the 5th of May 2023", [(2023, 5, 5, "5th of May 2023")]),
        # what follows the year does not take it away (a clock time is refused right after the day, not after the year)
        ("What happened on May 3, 2023 amid the rain?", [(2023, 5, 3, "May 3, 2023")]),
        ("What, on May 3, 2023: a cat?", [(2023, 5, 3, "May 3, 2023")]),
        ("March 5th amazed her", [(None, 3, 5, "March 5th")]),
        # a month without a day takes the year of a later date too
        ("What did she do between June and August 2023?", [(2023, 6, None, "June"), (2023, 8, None, "August 2023")]),
    ],
)
def test_the_dates_a_question_names_are_read_with_what_it_leaves_out(question, expected):
    assert _read(question) == expected


@pytest.mark.parametrize(
    "text",
    [
        "May I ask what she said?",  # a modal verb, not a month
        "What did she march for?",
        "What did he say last week?",  # relative: not read here
        "When was it, in 2023?",  # a year alone is too wide to point at a day
        "What time did the 3:15 pm train leave?",
        "Why do you think this may be?",  # month names that are words: months only when capitalised
        "What kind of march did Caroline join?",
        "Which 2 may attend?",
        "What did she buy from a painting by Jan?",  # a name, with no day or year
        "",
    ],
)
def test_what_is_not_an_absolute_day_or_month_is_not_read_as_one(text):
    assert named_dates(text) == []


def _epoch(d: date) -> float:
    return datetime.combine(d, datetime.min.time(), UTC).timestamp()


def test_a_day_reaches_from_the_day_before_to_a_week_after_and_a_month_likewise_around_its_days():
    day = spans("What happened on 3 June, 2023?", range(2023, 2024))
    assert day == [(_epoch(date(2023, 6, 3)) - DAY_BEFORE.total_seconds(), _epoch(date(2023, 6, 3)) + WEEK_AFTER.total_seconds())]
    month = spans("What happened in February 2024?", range(2023, 2024))  # the year said wins over the memory's
    assert month == [(_epoch(date(2024, 1, 31)), _epoch(date(2024, 2, 29) + WEEK_AFTER))]


def test_a_month_without_a_year_is_that_month_of_every_year_the_memory_holds():
    assert spans("When did they go camping in June?", range(2022, 2024)) == [
        (_epoch(date(2022, 5, 31)), _epoch(date(2022, 6, 30) + WEEK_AFTER)),
        (_epoch(date(2023, 5, 31)), _epoch(date(2023, 6, 30) + WEEK_AFTER)),
    ]
    assert spans("When did they go camping in June?", range(0)) == []  # no messages, no years
    assert spans("What was said on 31 June 2023?", range(2023, 2024)) == []  # no such day


def test_days_close_together_are_one_span():
    merged = spans("Where was John between August 11 and August 15 2023?", range(2023, 2024))
    assert merged == [(_epoch(date(2023, 8, 10)), _epoch(date(2023, 8, 15) + WEEK_AFTER))]


_PIECES = st.sampled_from(["May ", "June ", "in ", "Aug ", "of ", "3", "15th ", "2023", ", ", ".", "x", " "])


@given(st.lists(_PIECES, max_size=20).map("".join))
def test_phrases_never_overlap_and_spans_are_ordered_and_apart(text):
    found = named_dates(text)
    assert all(a.end <= b.start for a, b in zip(found, found[1:], strict=False))
    assert all(1 <= d.month <= 12 for d in found)
    out = spans(text, range(2022, 2024))
    assert all(lo < hi for lo, hi in out)
    assert all(a[1] < b[0] for a, b in zip(out, out[1:], strict=False))


def test_the_named_day_lifts_its_turn_over_a_closer_match_said_on_another_day(db, llm, backend, embedder):
    from nemori_cli.domain import IncomingMessage
    from nemori_cli.pipeline.runner import Pipeline
    from nemori_cli.retrieval.search import search
    from tests.support.scripted import scripted

    scripted(backend, facts=[[]])
    pipe = Pipeline(db, "u", llm, embedder)
    start = datetime(2023, 5, 8, 13)
    filler = [
        IncomingMessage(speaker="Ann", content=f"small talk {i}", timestamp=start + timedelta(days=3 * i), source_id=f"f{i}")
        for i in range(12)
    ]
    closer = IncomingMessage(
        speaker="Ann", content="we went hiking by the lake with the dog", timestamp=datetime(2023, 5, 20, 9), source_id="closer"
    )
    dated = IncomingMessage(speaker="Ann", content="hiking by a lake today", timestamp=datetime(2023, 6, 3, 18), source_id="dated")
    pipe.add_messages(sorted([*filler, closer, dated], key=lambda m: m.timestamp))
    pipe.process(flush=True)
    question = "Where did we go hiking with the dog by the lake on 3 June, 2023?"
    shipped = replace(PROFILES["budget"], k=0, facts=0, budget=0, turns=0)

    def first(options) -> str:
        hits, _ = search(db, "u", embedder, question, options)
        return next(h.text for h in hits if h.kind == "message")

    assert first(shipped) == closer.content  # more words of the question: first by meaning and by words
    assert first(replace(shipped, date_vote=1.0)) == dated.content  # said on the day the question names
    # a question that names no day is searched as shipped, whatever the weight
    undated = "Where did we go hiking with the dog by the lake?"
    assert search(db, "u", embedder, undated, replace(shipped, date_vote=1.0))[0] == search(db, "u", embedder, undated, shipped)[0]


def test_the_turns_of_a_named_day_are_those_said_inside_it_and_by_as_of(db, llm, backend, embedder):
    from nemori_cli.domain import IncomingMessage
    from nemori_cli.pipeline.runner import Pipeline
    from nemori_cli.store import message_index
    from tests.support.scripted import scripted

    scripted(backend, facts=[[]])
    pipe = Pipeline(db, "u", llm, embedder)
    days = [datetime(2023, 6, d, 12) for d in (1, 3, 8, 20)]
    pipe.add_messages([IncomingMessage(speaker="Ann", content=f"hiking day {d.day}", timestamp=d, source_id=str(d.day)) for d in days])
    pipe.process(flush=True)
    span = spans("Where did we go hiking on 3 June, 2023?", message_index.years(db, "u"))  # 2 to 11 June
    said = {row["id"]: row["content"] for row in db.query("SELECT id, content FROM messages WHERE user_id = 'u'")}
    inside = message_index.vector_search_between(db, "u", embedder.embed_query("hiking"), 10, span)
    assert sorted(said[i] for i, _ in inside) == ["hiking day 3", "hiking day 8"]
    by_then = message_index.vector_search_between(db, "u", embedder.embed_query("hiking"), 10, span, as_of=datetime(2023, 6, 5))
    assert [said[i] for i, _ in by_then] == ["hiking day 3"]
    assert message_index.vector_search_between(db, "u", embedder.embed_query("hiking"), 10, []) == []
    assert message_index.years(db, "u") == range(2023, 2024) and message_index.years(db, "nobody") == range(0)


def test_the_bench_offers_the_date_vote_as_a_built_and_an_unbuilt_row_and_ask_ships_without_it():
    rows = catalog.resolve("nemori-dated,nemori-unbuilt-dated")
    assert all(s.options == replace(PROFILES["core"], date_vote=1.0) for s in rows)
    assert PROFILES["core"].date_vote == 0.0


@pytest.mark.parametrize("value", [-1.0, "yes", True, float("inf"), float("nan")])
def test_a_negative_or_non_numeric_weight_is_refused(value):
    from nemori_cli.services.answer import search_options

    with pytest.raises(ConfigError, match="date_vote"):
        search_options("core", None, {"date_vote": value})
