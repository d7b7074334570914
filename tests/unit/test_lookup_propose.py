"""Prompt-lookup guesses (llm/lookup_decoding.propose): what follows the latest earlier occurrence of the last n tokens."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from nemori_cli.llm.lookup_decoding import propose


def h(*tokens: int) -> np.ndarray:
    return np.asarray(tokens, dtype=np.intc)


def test_the_tokens_after_an_earlier_occurrence_of_the_last_two():
    # ... 5 6 7 8 9 ... 5 6  -> guess 7 8 9
    assert propose(h(1, 5, 6, 7, 8, 9, 2, 5, 6), 3).tolist() == [7, 8, 9]


def test_at_most_k_tokens_and_never_past_the_history():
    assert propose(h(5, 6, 7, 8, 9, 5, 6), 2).tolist() == [7, 8]
    assert propose(h(5, 6, 7, 5, 6), 10).tolist() == [7, 5, 6]


def test_the_latest_occurrence_wins():
    assert propose(h(5, 6, 1, 5, 6, 2, 5, 6), 1).tolist() == [2]


def test_a_longer_match_beats_a_later_shorter_one():
    # the last three (4 5 6) occur once, early; (5 6) alone occurs later, followed by 9
    assert propose(h(4, 5, 6, 7, 0, 5, 6, 9, 4, 5, 6), 1, ngram_max=3, ngram_min=2).tolist() == [7]


def test_no_guess_without_a_match_of_ngram_min_tokens():
    assert propose(h(1, 2, 3, 4, 5), 4).tolist() == []
    assert propose(h(1, 9, 3, 4, 9), 4, ngram_min=2).tolist() == []  # one token repeats, two do not
    assert propose(h(1, 9, 3, 4, 9), 4, ngram_min=1).tolist() == [3, 4, 9]


def test_short_histories_and_k_zero():
    assert propose(h(), 4).tolist() == []
    assert propose(h(7), 4).tolist() == []
    assert propose(h(5, 6, 5, 6), 0).tolist() == []


@given(st.lists(st.integers(0, 4), max_size=60), st.integers(0, 9), st.integers(1, 3), st.integers(1, 3))
def test_a_guess_always_continues_a_real_earlier_occurrence(tokens, k, ngram_min, extra):
    history = np.asarray(tokens, dtype=np.intc)
    ngram_max = ngram_min + extra - 1
    guess = propose(history, k, ngram_max=ngram_max, ngram_min=ngram_min).tolist()
    assert len(guess) <= k
    if not guess:
        return
    # Some n in range, some earlier start i: history[i:i+n] is the tail and the guess is what followed it.
    n_ok = False
    for n in range(ngram_min, ngram_max + 1):
        tail = tokens[len(tokens) - n :]
        for i in range(0, len(tokens) - n):
            if tokens[i : i + n] == tail and tokens[i + n : i + n + len(guess)] == guess:
                n_ok = True
    assert n_ok
