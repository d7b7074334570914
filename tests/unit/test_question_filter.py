"""Which LoCoMo questions a bench run asks (bench/question_filter.py): none an earlier folder read (--unasked), only
those it read (--asked), only those a pattern matches (--matching); and a folder remembers which set it holds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nemori_cli.bench import locomo
from nemori_cli.bench.question_filter import QuestionFilter, asked_in, pattern
from nemori_cli.errors import InputError
from tests.conftest import locomo_file


def _folder(tmp_path: Path, name: str, records: list, tail: str = "") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    lines = [json.dumps(r) for r in records]
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n" + tail)
    return folder


def _answer(sample: str, qid: str, benchmark: str = "locomo") -> dict:
    return {"kind": "answer", "benchmark": benchmark, "sample": sample, "qid": qid, "unit": sample}


def test_the_questions_a_folder_answered_are_read_from_whole_conversations_and_haystacks(tmp_path):
    whole = _folder(tmp_path, "a", [_answer("conv-26", "3"), {"kind": "build", "unit": "conv-26"}, _answer("x", "1", "longmemeval")])
    hay = _folder(tmp_path, "b", [_answer("conv-41", "conv-41:7")], tail='{"kind": "answer", "sam')  # an interrupted last line
    assert asked_in([whole, hay]) == {("conv-26", 3), ("conv-41", 7)}
    assert asked_in([whole / "results.jsonl"]) == {("conv-26", 3)}  # the file itself does as well


def test_a_folder_without_results_or_with_a_foreign_id_is_one_clear_error(tmp_path):
    with pytest.raises(InputError, match=r"--unasked .*nowhere: no results.jsonl"):
        asked_in([tmp_path / "nowhere"])
    odd = _folder(tmp_path, "odd", [_answer("conv-26", "q-seven")])
    with pytest.raises(InputError, match=r"--asked .*results.jsonl:1: question id 'q-seven'"):
        asked_in([odd], "--asked")
    with pytest.raises(InputError, match=r"--matching '\(' is not a regular expression"):
        pattern("(")
    # folders that hold no LoCoMo answer at all would leave out nothing without a word
    other = _folder(tmp_path, "lme", [_answer("x", "1", "longmemeval"), 1, [2]])  # lines that are not records are skipped
    with pytest.raises(InputError, match=r"--unasked: no LoCoMo question was answered in .*lme"):
        asked_in([other])
    assert asked_in([other, _folder(tmp_path, "loc", [_answer("conv-26", "4")])]) == {("conv-26", 4)}  # one of several is fine


def test_a_filter_keeps_what_all_three_allow_and_its_key_names_the_set():
    keep = QuestionFilter(frozenset({("conv-26", 1)}), re.compile("june", re.I), frozenset({("conv-26", 1), ("conv-26", 2)}))
    assert keep.keeps("conv-26", 2, "What happened in June?")
    assert not keep.keeps("conv-26", 1, "What happened in June?")  # read before
    assert not keep.keeps("conv-26", 3, "What happened in June?")  # not among the only ones
    assert not keep.keeps("conv-26", 2, "What happened in May?")  # does not match
    assert QuestionFilter().key() == {} and not QuestionFilter().active()  # no filter: a folder's identity as before
    other = QuestionFilter(frozenset({("conv-26", 2)}), re.compile("june", re.I), keep.only)
    assert keep.key()["left_out"] != other.key()["left_out"] and keep.key()["only"] == other.key()["only"]


def test_units_ask_only_the_kept_questions_and_spread_what_is_left():
    path = locomo_file()
    everything = {q.qid for q in locomo.units(path, ["conv-26"], None, None, False)[0].questions}
    first = locomo.units(path, ["conv-26"], None, 20, False)[0].questions
    read = frozenset(("conv-26", int(q.qid)) for q in first)
    rest = locomo.units(path, ["conv-26"], None, None, False, keep=QuestionFilter(read))[0].questions
    assert {q.qid for q in rest} == everything - {q.qid for q in first}
    only = locomo.units(path, ["conv-26"], None, None, False, keep=QuestionFilter(only=read, matching=pattern(r"\bwhen\b")))
    assert only[0].questions and all(q.qid in {q.qid for q in first} and "when" in q.text.lower() for q in only[0].questions)
