"""Scoring functions on hand-computed cases (recipes in ../shared/BENCHMARKS.md)."""

from __future__ import annotations

import math

import pytest

from nemori_cli.bench.metrics import (
    bleu1,
    evidence_recall,
    locomo_f1,
    official_token_f1,
    parse_judge_label,
    parse_yes_no,
    set_f1,
)


# -- set F1: lowercase, . , ! ? to spaces, token sets ---------------------------
def test_set_f1_exact_and_partial():
    assert set_f1("7 May 2023", "7 May 2023") == 1.0
    # pred {she, went, on, 7, may, 2023}, gold {7, may, 2023}: P = 3/6, R = 3/3, F1 = 2/3
    assert set_f1("She went on 7 May, 2023.", "7 May 2023") == pytest.approx(2 / 3)


def test_set_f1_counts_each_token_once_and_zero_when_disjoint():
    assert set_f1("the the cat", "the cat") == 1.0  # sets: repetition is not rewarded or punished
    assert set_f1("Berlin", "Paris") == 0.0
    assert set_f1("", "Paris") == 0.0


# -- LoCoMo's official F1 --------------------------------------------------------
def test_official_f1_normalises_stems_and_drops_articles_and_and():
    # "The cats, and dogs" -> "cats dogs" -> stems [cat, dog]
    assert official_token_f1("The cats, and dogs", "cat dog") == 1.0


def test_official_f1_uses_multisets():
    # pred [pari, pari], gold [pari]: common 1, P = 1/2, R = 1, F1 = 2/3
    assert official_token_f1("paris paris", "paris") == pytest.approx(2 / 3)


def test_category_1_averages_the_best_match_of_each_comma_separated_gold_part():
    assert locomo_f1("painting", "hiking, painting", 1) == pytest.approx(0.5)  # hiking 0, painting 1
    assert locomo_f1("painting, hiking, swimming", "hiking, painting", 1) == 1.0


def test_category_3_cuts_the_gold_answer_at_the_first_semicolon():
    assert locomo_f1("likely yes", "Likely yes; she likes it", 3) == 1.0
    # The same pair scored as category 4 keeps the whole gold: stems [like, ye] vs
    # [like, ye, she, like, it]: common 2, P = 1, R = 2/5, F1 = 4/7
    assert locomo_f1("likely yes", "Likely yes; she likes it", 4) == pytest.approx(4 / 7)


def test_integer_answers_are_compared_as_text():
    assert locomo_f1("2022", 2022, 2) == 1.0
    assert set_f1("in 2022", str(2022)) == pytest.approx(2 / 3)


def test_category_5_scores_an_abstention():
    assert locomo_f1("No information available.", "anything", 5) == 1.0
    assert locomo_f1("That is not mentioned in the conversation", "anything", 5) == 1.0
    assert locomo_f1("Berlin", "anything", 5) == 0.0


def test_an_unknown_category_is_an_error():
    with pytest.raises(ValueError):
        locomo_f1("x", "y", 7)


# -- BLEU-1: NLTK sentence_bleu, weights (1, 0, 0, 0), smoothing method 1 ----------
def test_bleu1_brevity_penalty_and_clipped_precision():
    # precision 2/2, brevity penalty exp(1 - 3/2)
    assert bleu1("the cat", "the cat sat") == pytest.approx(math.exp(-0.5))
    # 3 of 6 predicted unigrams match, no penalty (prediction longer)
    assert bleu1("a cat sat on the mat", "the cat sat") == pytest.approx(0.5)
    assert bleu1("dog", "the cat sat") == 0.0
    assert bleu1("", "the cat") == 0.0


# -- the judges' answers ---------------------------------------------------------------
@pytest.mark.parametrize(
    "answer, label",
    [
        ('{"reason": "same day", "label": "CORRECT"}', True),
        ('{"label": "wrong"}', False),
        ("The answer is CORRECT.", True),  # not JSON: the one label word in the text
        ('```json\n{"label": "WRONG"\n```', False),  # broken JSON
        ("CORRECT or WRONG? Hard to say.", None),  # both words: not guessed
        ('{"label": 3}', None),
        ("", None),
    ],
)
def test_judge_label_parsing(answer, label):
    assert parse_judge_label(answer) is label


@pytest.mark.parametrize("answer, verdict", [("Yes.", True), ("no, it does not", False), ("yes and no", None), ("", None)])
def test_yes_no_parsing(answer, verdict):
    assert parse_yes_no(answer) is verdict


# -- evidence recall -------------------------------------------------------------------
def test_evidence_recall_is_the_share_of_evidence_turns_retrieved():
    assert evidence_recall(["D1:3", "D2:5"], ["D1:3", "D1:4"]) == 0.5
    assert evidence_recall(["D1:3", "D1:3"], ["D1:3"]) == 1.0  # a repeated id counts once
    assert evidence_recall([], ["D1:3"]) is None  # no evidence: not a zero


# -- LongMemEval without a judge ---------------------------------------------------


def test_contains_answer_wants_the_numbers_when_the_gold_has_any():
    from nemori_cli.bench.metrics import contains_answer

    assert contains_answer("38", "38 subjects")
    assert contains_answer("It took 7 days.", "7 days. 8 days (including the last day) is also acceptable.")
    assert not contains_answer("8 days", "7 days. 8 days (including the last day) is also acceptable.")  # only the first clause
    assert contains_answer("I spent $12 on each", "$12") and not contains_answer("12 dollars", "$12")
    assert not contains_answer("1", "25")


def test_contains_answer_wants_every_content_word_otherwise():
    from nemori_cli.bench.metrics import contains_answer

    assert contains_answer("Over a year of waiting.", "over a year")
    assert not contains_answer("a year", "over a year")
    assert contains_answer("Her name is Luna!", "Luna")
    assert not contains_answer("anything", "")


def test_abstention_is_recognised_in_the_usual_phrasings():
    from nemori_cli.bench.metrics import abstains

    for said in ("I do not know.", "You didn't mention it; the information is not provided.", "That cannot be answered from the memories."):
        assert abstains(said), said
    for said in ("Luna", "4 engineers", "Knowledge is power"):
        assert not abstains(said), said
