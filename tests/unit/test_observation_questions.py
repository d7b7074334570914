"""scripts/observation_questions.py: which observations it asks about, which drafts it keeps, the file it assembles."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from tests.conftest import REPO, locomo_file

spec = importlib.util.spec_from_file_location("observation_questions", REPO / "scripts" / "observation_questions.py")
assert spec and spec.loader
oq = importlib.util.module_from_spec(spec)
spec.loader.exec_module(oq)

ITEM = {
    "person": "Melanie",
    "fact": "Melanie painted a lake sunrise last year which holds special meaning to her.",
    "lines": ["Melanie: Yeah, I painted that lake sunrise last year! It's special to me."],
}


def test_a_short_answer_copied_from_the_turn_is_kept():
    assert oq.check({"question": "What did Melanie paint last year?", "answer": "a lake sunrise"}, ITEM) is None


@pytest.mark.parametrize(
    ("draft", "why"),
    [
        ({"question": "What did Melanie paint last year", "answer": "lake sunrise"}, "not a question"),
        ({"question": "What did Melanie paint?", "answer": "lake sunrise"}, "question under 5 words"),
        ({"question": "What did she paint last year?", "answer": "lake sunrise"}, "question does not name the person"),
        ({"question": "What did Melanie paint last year?", "answer": "a mountain sunset"}, "answer has words neither"),
        ({"question": "What does the painting hold for Melanie?", "answer": "meaning"}, "answer has no word of the line"),
        ({"question": "What did Melanie paint, the lake sunrise?", "answer": "lake sunrise"}, "question holds the answer"),
        ({"question": "What did Melanie paint last year?", "answer": "that lake sunrise last year, special to me"}, "answer not 1-6"),
    ],
)
def test_a_draft_that_fails_a_check_says_which(draft, why):
    assert (oq.check(draft, ITEM) or "").startswith(why)


def test_observations_point_only_at_turns_no_dev_question_uses():
    path = locomo_file()
    data = json.loads(path.read_text())
    asked = {(s["sample_id"], d) for s in data for q in s["qa"] for e in q.get("evidence") or [] for d in re.findall(r"D\d+:\d+", str(e))}
    items = oq.observations()
    assert items, "the dev file has observations about unasked turns"
    assert all((i["sample"], d) not in asked for i in items for d in i["evidence"])
    assert len({i["id"] for i in items}) == len(items)


def test_assemble_writes_kept_questions_as_single_hop_in_a_locomo_file(tmp_path, monkeypatch):
    locomo_file()
    records = tmp_path / "records.jsonl"
    item = oq.observations()[0]
    said = oq.words(item["lines"][0])[-1]  # the last word the turn says
    kept = {**item, "draft": {"question": f"What did {item['person']} say first then?", "answer": said}, "kept": True, "why": None}
    dropped = {**kept, "id": "other", "draft": {"question": "What?", "answer": said}}  # recorded as kept, fails the checks now
    records.write_text("\n".join(json.dumps(r) for r in (kept, dropped)) + "\n")
    monkeypatch.setattr(oq, "OUT", records)
    out = tmp_path / "set.json"
    assert oq.assemble(out, None) == 0
    [sample] = json.loads(out.read_text())
    assert sample["sample_id"] == item["sample"]
    assert sample["qa"] == [{"question": kept["draft"]["question"], "answer": said, "evidence": item["evidence"], "category": 4}]
    assert sample["conversation"]  # the conversation itself comes with it, unchanged
