"""LoCoMo as bench units: one per sample, its chosen sessions and the questions about them."""

from __future__ import annotations

from pathlib import Path

from nemori_cli.bench import metrics
from nemori_cli.bench.datasets import locomo_questions
from nemori_cli.bench.haystack import distractor, interleave, unit_key
from nemori_cli.bench.judge import judge_locomo
from nemori_cli.bench.question_filter import QuestionFilter
from nemori_cli.bench.run import Judge, Question, Unit
from nemori_cli.bench.systems import Reply
from nemori_cli.errors import InputError
from nemori_cli.importers.locomo import in_sessions, load_locomo_samples, read_locomo
from nemori_cli.llm.base import StructuredLLM

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def units(
    path: Path,
    samples: list[str],
    sessions: tuple[int, int] | None,
    cap: int | None,
    adversarial: bool,
    haystack: list[str] | None = None,
    keep: QuestionFilter | None = None,
) -> list[Unit]:
    """A unit per sample (all samples when none is named); ``cap`` limits the questions per sample.

    With ``haystack``, each sample's chosen sessions are interleaved by date
    with every session of the haystack's other samples (bench/haystack.py),
    and only the sample's own questions are asked. ``keep`` chooses among a
    sample's questions before ``cap`` spreads what is left (bench/question_filter.py).
    """
    with path.open("rb") as f:
        ids = [str(s["sample_id"]) for s in load_locomo_samples(f, str(path))]
    chosen = samples or ids
    for name in haystack or []:
        if name not in ids:
            raise InputError(f"--haystack: {path} has no sample {name!r}; samples: {', '.join(ids)}")
    out = []
    for sample_id in chosen:
        messages = _read(path, sample_id)
        if sessions:
            messages = in_sessions(messages, sessions, f"{path}: sample {sample_id}")
        key = sample_id
        if haystack:
            others = {name: distractor(name, _read(path, name)) for name in haystack if name != sample_id}
            messages = interleave(messages, others)
            key = unit_key(sample_id, list(others), sessions)
        with path.open("rb") as f:
            found = locomo_questions(f, str(path), sample_id, sessions, include_adversarial=adversarial)
        if keep is not None:
            found = [q for q in found if keep.keeps(sample_id, q.index, q.question)]
        questions = [
            Question(
                # In a haystack several samples' questions share one memory, so their ids name the sample.
                qid=f"{sample_id}:{q.index}" if haystack else str(q.index),
                text=q.question,
                gold=q.answer,
                evidence=q.evidence,
                meta={"category": q.category, "group": CATEGORIES.get(q.category, str(q.category)), "sample": sample_id},
            )
            for q in spread(found, cap)
        ]
        out.append(Unit(key, messages, questions))
    return out


def _read(path: Path, sample_id: str) -> list:
    with path.open("rb") as f:
        return read_locomo(f, str(path), sample_id=sample_id)


def spread(found: list, cap: int | None) -> list:
    """At most ``cap`` questions, shared evenly among the categories and spread evenly through each, in the file's order.

    The first N of a LoCoMo sample are about its first sessions and mostly of
    one category; a whole-conversation run must ask about all of it.
    """
    if not cap or cap >= len(found):
        return list(found)
    groups: dict[int, list] = {}
    for q in found:
        groups.setdefault(q.category, []).append(q)
    share = dict.fromkeys(groups, 0)
    left = cap
    while left:  # one more for each category that still has questions, in turn
        for category, members in groups.items():
            if left and share[category] < len(members):
                share[category] += 1
                left -= 1
    chosen: set[int] = set()  # id()s of the questions kept
    for category, members in groups.items():
        n = share[category]
        chosen.update(id(members[(i * len(members)) // n]) for i in range(n))
    return [q for q in found if id(q) in chosen]


def text_scores(answer: str, gold: str, category: int) -> dict:
    """The scores computed from the answer's text alone (recomputed by every report, so a scorer fix applies to old runs)."""
    official = metrics.locomo_f1(answer, gold, category)
    return {
        # Category 5's gold is the trap answer, so both F1s use the official abstention rule there.
        "set_f1": official if category == 5 else metrics.set_f1(answer, gold),
        "official_f1": official,
        "bleu1": metrics.bleu1(answer, gold),
    }


def score(q: Question, reply: Reply) -> dict:
    return {**text_scores(reply.answer, q.gold, q.meta["category"]), "evidence_recall": metrics.evidence_recall(q.evidence, reply.turns)}


def rescore(record: dict) -> dict:
    return {**record, **text_scores(record["answer"], record["gold"], record["category"])}


def judge_with(llm: StructuredLLM, name: str) -> Judge:
    return Judge(name, lambda r: judge_locomo(llm, r["question"], r["gold"], r["answer"]))
