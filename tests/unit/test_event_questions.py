"""scripts/event_questions.py: the questions it writes from events, the ones it drops and why, the file it assembles."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.conftest import REPO, locomo_file

spec = importlib.util.spec_from_file_location("event_questions", REPO / "scripts" / "event_questions.py")
assert spec and spec.loader
eq = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eq)


@pytest.mark.parametrize(
    ("verb", "plain"),
    [("loses", "lose"), ("tries", "try"), ("finishes", "finish"), ("watches", "watch"), ("has", "have"), ("begins", "begin")],
)
def test_a_present_tense_verb_is_put_back_to_its_plain_form(verb, plain):
    assert eq.plain(verb) == plain


@pytest.mark.parametrize("word", ["started", "lost", "class", "and", "s"])
def test_a_word_that_is_not_a_present_tense_verb_has_no_plain_form(word):
    assert eq.plain(word) is None


def test_an_event_becomes_a_when_question_about_its_person():
    assert eq.question_of("Jon loses his job as a banker.", "Jon") == ("When did Jon lose his job as a banker?", "")
    assert eq.question_of("Caroline is inspired by her mentors.", "Caroline") == ("When was Caroline inspired by her mentors?", "")
    assert eq.question_of("Jon was promoted.", "Jon") == ("When was Jon promoted?", "")
    question, why = eq.question_of("Gina's store opens.", "Gina")
    assert question is None and why == "does not open with its speaker's name"
    question, why = eq.question_of("Jon started a studio.", "Jon")
    assert question is None and "'started' is not a present-tense verb" in why


def test_the_answer_is_the_sessions_month_unless_last_week_may_be_the_month_before():
    assert eq.month_of("20 January, 2023") == ("January 2023", "")
    assert eq.month_of("8 July, 2023") == ("July 2023", "")
    month, why = eq.month_of("7 July, 2023")
    assert month is None and "may be the month before" in why


def test_a_single_hop_question_about_the_same_turn_leaves_the_event_kept_but_a_when_question_does_not():
    about_it = {"question": "What job did Jon lose as a banker?", "answer": "banker", "evidence": [], "category": 1}
    sample = _sample([about_it])
    assert eq.judge(eq.events(sample)[0], sample)["dropped"] == ""
    sample = _sample([{**about_it, "question": "When did Jon lose the job as a banker?"}])  # any category, asked "When"
    assert eq.judge(eq.events(sample)[0], sample)["dropped"].startswith("a dev question asks about it")


def _sample(qa: list[dict]) -> dict:
    turns = [
        {"speaker": "Jon", "dia_id": "D1:1", "text": "Hey Gina, long week."},
        {"speaker": "Jon", "dia_id": "D1:2", "text": "I lost my job as a banker yesterday, so I'm starting my own dance studio."},
    ]
    return {
        "sample_id": "conv-x",
        "conversation": {"speaker_a": "Jon", "speaker_b": "Gina", "session_1": turns, "session_1_date_time": "1:56 pm on 20 January, 2023"},
        "event_summary": {"events_session_1": {"Jon": ["Jon loses his job as a banker."], "Gina": [], "date": "20 January, 2023"}},
        "qa": qa,
    }


def test_an_event_nobody_asked_the_time_of_is_kept_with_its_best_turn_as_evidence():
    sample = _sample([{"question": "What job did Jon lose?", "answer": "banker", "evidence": ["D1:2"], "category": 4}])
    [item] = eq.events(sample)
    record = eq.judge(item, sample)
    assert record["dropped"] == ""
    assert (record["question"], record["answer"], record["evidence"]) == (
        "When did Jon lose his job as a banker?",
        "January 2023",
        ["D1:2"],
    )


@pytest.mark.parametrize(
    "qa",
    [
        {"question": "When did Jon lose his job as a banker?", "answer": "19 January, 2023", "evidence": [], "category": 2},  # its words
        {"question": "When was Jon without work?", "answer": "January 2023", "evidence": ["D1:2"], "category": 2},  # its turn
        {"question": "When did Jon lose the banker job?", "answer": "January 2023", "evidence": [], "category": 1},  # "When"
    ],
)
def test_an_event_whose_time_a_dev_question_asked_is_dropped(qa):
    sample = _sample([qa])
    record = eq.judge(eq.events(sample)[0], sample)
    assert record["dropped"].startswith("a dev question asks about it") and record["question"] is None


def test_an_event_not_found_in_its_session_is_dropped():
    sample = _sample([])
    sample["event_summary"]["events_session_1"]["Jon"] = ["Jon adopts a puppy from the shelter."]
    record = eq.judge(eq.events(sample)[0], sample)
    assert record["dropped"].startswith("not found in session 1")


def test_assemble_writes_kept_questions_as_temporal_in_a_locomo_file(tmp_path, monkeypatch):
    data = json.loads(locomo_file().read_text())
    sample = data[0]
    kept = {"sample": sample["sample_id"], "question": "When did X do Y?", "answer": "May 2023", "evidence": ["D1:3"], "dropped": ""}
    dropped = {**kept, "question": None, "dropped": "a dev question asks about it: 'When?'"}
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(json.dumps(r) for r in (kept, dropped)) + "\n")
    monkeypatch.setattr(eq, "OUT", records)
    out = tmp_path / "set.json"
    assert eq.assemble(out, None) == 0
    [written] = json.loads(out.read_text())
    assert written["qa"] == [{"question": "When did X do Y?", "answer": "May 2023", "evidence": ["D1:3"], "category": 2}]
    assert written["conversation"] == sample["conversation"]  # the conversation itself comes with it, unchanged


def test_the_committed_records_are_what_make_writes_now(tmp_path, monkeypatch):
    locomo_file()
    committed = eq.OUT.read_text()
    monkeypatch.setattr(eq, "OUT", tmp_path / "again.jsonl")
    assert eq.make() == 0
    assert (tmp_path / "again.jsonl").read_text() == committed  # no model, no chance: the set can be made again exactly
