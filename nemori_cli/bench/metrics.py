"""Scoring functions for LoCoMo and LongMemEval, each as the published recipes define it.

Numbers only compare with published ones if they are computed the same way,
so each function follows one recipe of ../shared/BENCHMARKS.md exactly,
quirks included, and is tested on hand-computed cases:

- ``set_f1``: the Nemori / Mem0 / A-MEM evaluations (token *sets*);
- ``locomo_f1``: LoCoMo's official scorer (stemmed token *multisets*, with
  its per-category rules: comma-separated parts for category 1, the gold
  cut at ';' for category 3, an abstention phrase for category 5);
- ``bleu1``: NLTK sentence BLEU with unigram weights and smoothing method 1;
- ``parse_judge_label``: the label out of an LLM judge's answer, strict JSON
  first, then the label word, else None (counted, never guessed);
- ``evidence_recall``: the share of a question's evidence turns that the
  retrieved memories contain.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

# -- set F1 (Nemori, Mem0, A-MEM) -------------------------------------------

_SET_PUNCT = re.compile(r"[.,!?]")


def _set_tokens(text: str) -> set[str]:
    return set(_SET_PUNCT.sub(" ", str(text).lower()).split())


def set_f1(prediction: str, gold: str) -> float:
    pred, ref = _set_tokens(prediction), _set_tokens(gold)
    common = len(pred & ref)
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


# -- LoCoMo's official F1 ----------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = set(string.punctuation)
ABSTENTION_PHRASES = ("no information available", "not mentioned")


@lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem import PorterStemmer

    return PorterStemmer()


def _official_normal(text: str) -> str:
    # The official order: commas out, lowercase, punctuation out, then the
    # articles (and "and"), then whitespace folded.
    text = str(text).replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _stems(text: str) -> list[str]:
    stem = _stemmer().stem
    return [stem(w) for w in _official_normal(text).split()]


def official_token_f1(prediction: str, gold: str) -> float:
    pred, ref = _stems(prediction), _stems(gold)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def _multi_answer_f1(prediction: str, gold: str) -> float:
    """Category 1: each comma-separated gold part scored by its best prediction part, averaged."""
    preds = [p.strip() for p in str(prediction).split(",")]
    golds = [g.strip() for g in str(gold).split(",")]
    return sum(max(official_token_f1(p, g) for p in preds) for g in golds) / len(golds)


def locomo_f1(prediction: str, gold, category: int) -> float:
    """The official per-question score; ``gold`` may be an int (use of str() as the scorer does)."""
    gold = str(gold)
    if category == 5:
        said = str(prediction).lower()
        return 1.0 if any(p in said for p in ABSTENTION_PHRASES) else 0.0
    if category == 3:
        gold = gold.split(";")[0].strip()
    if category == 1:
        return _multi_answer_f1(prediction, gold)
    if category in (2, 3, 4):
        return official_token_f1(prediction, gold)
    raise ValueError(f"unknown LoCoMo category {category!r}")


# -- BLEU-1 --------------------------------------------------------------------


def bleu1(prediction: str, gold) -> float:
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    tokenize = NLTKWordTokenizer().tokenize
    pred = tokenize(str(prediction).lower())
    ref = tokenize(str(gold).lower())
    if not pred or not ref:
        return 0.0
    return float(sentence_bleu([ref], pred, weights=(1, 0, 0, 0), smoothing_function=SmoothingFunction().method1))


# -- LLM judge ---------------------------------------------------------------

_LABEL = re.compile(r"\b(CORRECT|WRONG)\b")


def parse_judge_label(answer: str) -> bool | None:
    """True for CORRECT, False for WRONG, None when the judge's answer says neither clearly.

    Strict JSON with a "label" key first; otherwise the label words in the
    text, but only if exactly one of the two appears (a judge that writes
    "not WRONG but CORRECT" is not guessed at).
    """
    try:
        data = json.loads(answer)
    except (ValueError, TypeError):
        data = None
    if isinstance(data, dict) and isinstance(data.get("label"), str):
        label = data["label"].strip().upper()
        if label in ("CORRECT", "WRONG"):
            return label == "CORRECT"
    found = set(_LABEL.findall(str(answer).upper()))
    if len(found) == 1:
        return found.pop() == "CORRECT"
    return None


def parse_yes_no(answer: str) -> bool | None:
    """LongMemEval's judge answers yes or no; anything else is None."""
    words = re.findall(r"[a-z]+", str(answer).lower())
    found = {w for w in words if w in ("yes", "no")}
    if len(found) == 1:
        return found.pop() == "yes"
    return None


# -- without a judge (LongMemEval) ---------------------------------------------

_ABSTAINS = re.compile(
    r"\b(do not know|don't know|not (?:mentioned|known|available|provided|enough|specified|stated)"
    r"|no information|no mention|did not mention|didn't mention"
    r"|(?:cannot|can't|can not) (?:be )?(?:answer|determin|tell)\w*|unknown)\b"
)
_STOP = frozenset(
    ["a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "is", "was", "were", "be", "i", "my", "you", "your", "it"]
)


def abstains(prediction: str) -> bool:
    """Does the answer say it cannot answer? (a lexical check, for LongMemEval's _abs questions)"""
    return bool(_ABSTAINS.search(str(prediction).lower()))


def contains_answer(prediction: str, gold: str) -> bool:
    """The gold answer's key words appear in the prediction (a strict lexical stand-in for LongMemEval's judge).

    Only the gold's first clause counts ("7 days. 8 days (including the last
    day) is also acceptable." -> "7 days"). If that clause has numbers, the
    numbers are the key words ("38 subjects" is answered by "38"); otherwise
    every content word must appear ("over a year"). A right answer worded
    differently is missed, so the match reads low, never high, against a judge.
    """
    core = re.split(r"\.\s|\(|;", str(gold).strip(), maxsplit=1)[0]
    wanted = _set_tokens(core) - _STOP
    numbers = {w for w in wanted if any(ch.isdigit() for ch in w)}
    return bool(wanted) and (numbers or wanted) <= _set_tokens(prediction)


# -- retrieval -----------------------------------------------------------------


def evidence_recall(evidence: Iterable[str], retrieved_turns: Iterable[str]) -> float | None:
    """Share of the evidence turn ids found among the retrieved memories' turns; None without evidence."""
    wanted = [e for e in dict.fromkeys(evidence) if e]
    if not wanted:
        return None
    got = set(retrieved_turns)
    return sum(e in got for e in wanted) / len(wanted)


# -- answers that are not answers ---------------------------------------------

# A reply that opens like a chat message: what a small model copies from a
# long context instead of answering ("Sure Sam, Evan would be glad to help").
_PLEASANTRY = re.compile(
    r"^\W*(sure|wow|thanks|thank you|hey|hi|hello|oh|aw+|yay|haha|lol|congrat\w*|glad|sounds|good luck|awesome|amazing|"
    r"that'?s (great|awesome|amazing|so|cool|wonderful)|what a|i'?m (so )?(happy|glad|sorry|excited))\b",
    re.IGNORECASE,
)
_PRAISE = re.compile(r"\b(sounds|looks|seems) (so )?(awesome|great|fun|amazing|lovely|cool|good|wonderful|exciting)\b", re.IGNORECASE)
# First person in an answer about people: the model speaking as one of them.
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'll|i'd|me|my|mine|we|we're|we've|our|ours|us)\b", re.IGNORECASE)


def chat_line(answer: str, question: str) -> bool:
    """A pleasantry, a first-person line, or the question said back, rather than an answer (a heuristic, counted, not scored).

    The question's own first-person words ("my", as in "What did Caroline say
    about my book?") do not count against an answer that repeats them.
    """
    text = str(answer).strip()
    if not text or abstains(text):
        return False
    if _PLEASANTRY.match(text) or _PRAISE.search(text):
        return True
    asked = {w.lower() for w in _FIRST_PERSON.findall(question)}
    if any(w.lower() not in asked for w in _FIRST_PERSON.findall(text)):
        return True
    words = _set_tokens(text)
    return len(words) >= 4 and set_f1(text, question) >= 0.8
