"""LongMemEval as bench units: one isolated memory per question, its sessions in order with their dates."""

from __future__ import annotations

from pathlib import Path

from nemori_cli.bench import metrics
from nemori_cli.bench.datasets import longmemeval_items
from nemori_cli.bench.haystack import distractor, interleave
from nemori_cli.bench.judge import judge_longmemeval
from nemori_cli.bench.run import Judge, Question, Unit
from nemori_cli.bench.systems import Reply
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.prompts.render import when

TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "temporal-reasoning",
    "knowledge-update",
    "multi-session",
)


def units(path: Path, cap: int | None, per_type: int | None = None, haystack: int | None = None) -> list[Unit]:
    """A unit per question, in file order: the first ``cap``, or the first ``per_type`` of each type.

    With ``per_type``, abstention questions count as a type of their own, so
    a small slice still has every kind of question in it. With ``haystack``,
    each question's sessions are interleaved by date with those of up to that
    many other questions of the file (the next ones, wrapping round), leaving
    out any session dated after the question is asked: an oracle file's
    evidence sessions inside other people's, a long history made from it.
    """
    with path.open("rb") as f:
        items = longmemeval_items(f, str(path))
    everyone = list(items)
    if per_type:
        taken: dict[str, int] = {}
        kept = []
        for item in items:
            kind = "abstention" if item.abstention else item.question_type
            if taken.get(kind, 0) < per_type:
                taken[kind] = taken.get(kind, 0) + 1
                kept.append(item)
        items = kept
    out = []
    for item in items[: cap if cap else None]:
        messages = [m for _, _, session in item.sessions for m in session]
        key = item.question_id
        if haystack:
            messages = _inside_others(item, everyone, haystack)
            key = f"{item.question_id}+haystack{haystack}"
        question = Question(
            qid=item.question_id,
            text=item.question,
            gold=item.answer,
            evidence=item.evidence,
            today=when(item.question_date),  # the answer prompt is told the day the question is asked
            meta={"question_type": item.question_type, "abstention": item.abstention, "group": item.question_type},
        )
        out.append(Unit(key, messages, [question]))
    return out


def _inside_others(item, everyone: list, count: int) -> list:
    """The question's own sessions among those of ``count`` other questions, by date, none after the question's date."""
    at = next(i for i, other in enumerate(everyone) if other.question_id == item.question_id)
    others = [everyone[(at + step) % len(everyone)] for step in range(1, len(everyone))][:count]
    own = [m for _, _, session in item.sessions for m in session]
    distractors = {
        other.question_id: distractor(
            other.question_id, [m for _, start, session in other.sessions if start <= item.question_date for m in session]
        )
        for other in others
    }
    return interleave(own, {k: v for k, v in distractors.items() if v})


def text_scores(answer: str, gold: str, question_type: str, abstention: bool) -> dict:
    """The scores computed from the answer's text alone (recomputed by every report)."""
    if abstention:
        match = metrics.abstains(answer)
    elif question_type == "single-session-preference":
        match = None  # the gold is a rubric; only a judge can grade it
    else:
        match = metrics.contains_answer(answer, gold)
    return {"match": match, "set_f1": metrics.set_f1(answer, gold)}


def score(q: Question, reply: Reply) -> dict:
    scores = text_scores(reply.answer, q.gold, q.meta["question_type"], q.meta["abstention"])
    return {**scores, "evidence_recall": metrics.evidence_recall(q.evidence, reply.turns)}


def rescore(record: dict) -> dict:
    return {**record, **text_scores(record["answer"], record["gold"], record["question_type"], record["abstention"])}


def judge_with(llm: StructuredLLM, name: str) -> Judge:
    return Judge(name, lambda r: judge_longmemeval(llm, r["question_type"], r["abstention"], r["question"], r["gold"], r["answer"]))
