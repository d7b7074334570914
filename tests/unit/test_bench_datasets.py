"""Benchmark questions from the development slices in ../shared/data."""

from __future__ import annotations

import io
import json
from datetime import datetime

import pytest

from nemori_cli.bench.datasets import evidence_ids, locomo_questions, longmemeval_items, parse_longmemeval_date
from nemori_cli.errors import InputError
from tests.conftest import SHARED_DATA, locomo_file


def longmemeval_file():
    path = SHARED_DATA / "longmemeval" / "longmemeval-oracle-dev.json"
    if not path.is_file():
        pytest.skip(f"LongMemEval development data not found at {path}")
    return path


def test_malformed_evidence_strings_still_yield_their_ids():
    assert evidence_ids(["D8:6; D9:17", "D1:3", "D1:3"]) == ("D8:6", "D9:17", "D1:3")
    assert evidence_ids(["nonsense"]) == ()


def test_questions_are_scoped_to_the_ingested_sessions():
    with locomo_file().open("rb") as f:
        scoped = locomo_questions(f, "dev", "conv-26", (1, 5))
    with locomo_file().open("rb") as f:
        everything = locomo_questions(f, "dev", "conv-26")
    assert 0 < len(scoped) < len(everything)
    assert all(q.sessions and max(q.sessions) <= 5 for q in scoped)
    assert all(q.category != 5 for q in everything)  # excluded unless asked for


def test_adversarial_questions_come_with_their_adversarial_answer_when_asked_for():
    with locomo_file().open("rb") as f:
        questions = locomo_questions(f, "dev", "conv-26", include_adversarial=True)
    adversarial = [q for q in questions if q.category == 5]
    assert adversarial and all(q.answer for q in adversarial)


def test_integer_answers_become_text_and_an_unknown_sample_is_named():
    with locomo_file().open("rb") as f:
        questions = locomo_questions(f, "dev", "conv-26")
    assert all(isinstance(q.answer, str) for q in questions)
    with locomo_file().open("rb") as f, pytest.raises(InputError, match="conv-99"):
        locomo_questions(f, "dev", "conv-99")


def test_longmemeval_records_become_dated_sessions_in_order():
    raw = json.loads(longmemeval_file().read_text())
    with longmemeval_file().open("rb") as f:
        items = longmemeval_items(f, "dev")
    assert len(items) == 20 and sum(i.abstention for i in items) == 2
    for item, record in zip(items, raw):
        assert [sid for sid, _, _ in item.sessions] == record["haystack_session_ids"]  # the file's order, kept
        assert [len(m) for _, _, m in item.sessions] == [len(s) for s in record["haystack_sessions"]]
        for _, start, messages in item.sessions:
            times = [m.timestamp for m in messages]
            assert times[0] == start and times == sorted(times)
            assert {m.speaker for m in messages} <= {"user", "assistant"}


def test_longmemeval_dates_and_bad_records():
    assert parse_longmemeval_date("2023/05/30 (Tue) 23:40") == datetime(2023, 5, 30, 23, 40)
    with pytest.raises(InputError):
        parse_longmemeval_date("30 May 2023")
    with pytest.raises(InputError, match="record 0"):
        longmemeval_items(io.BytesIO(json.dumps([{"question_id": "q"}]).encode()), "bad.json")
