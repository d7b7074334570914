"""LLM judges: LoCoMo's generous CORRECT/WRONG grade and LongMemEval's per-type yes/no.

Both are constrained to a small JSON answer. A judge that still answers
nothing usable gives None (reported as unjudged, never counted as right or
wrong); when only the label field is broken, the raw text is read the
lenient way (metrics.parse_judge_label / parse_yes_no).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from nemori_cli import stages
from nemori_cli.bench.metrics import parse_judge_label, parse_yes_no
from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import StructuredLLM

LOCOMO_SYSTEM = (
    "You grade answers to questions about a conversation. You see the question, the "
    "reference answer and a generated answer. Be generous: the generated answer is "
    "CORRECT when it is about the same thing as the reference and does not contradict "
    "it, even if it is longer or worded differently. A date written another way, or a "
    "relative reference ('the week before 9 June') to the same time, counts as correct. "
    "It is WRONG when it misses the point, names something else, or says it does not "
    "know. Give a one-sentence reason, then the label. Answer with JSON only."
)


class LocomoGrade(BaseModel):
    reason: str = Field(description="One sentence.")
    label: Literal["CORRECT", "WRONG"]


class YesNo(BaseModel):
    answer: Literal["yes", "no"]


def judge_locomo(llm: StructuredLLM, question: str, gold: str, prediction: str) -> bool | None:
    messages = [
        {"role": "system", "content": LOCOMO_SYSTEM},
        {"role": "user", "content": f"Question: {question}\nReference answer: {gold}\nGenerated answer: {prediction}"},
    ]
    try:
        return llm.complete(messages, schema=LocomoGrade, stage=stages.JUDGE).value.label == "CORRECT"
    except LLMOutputError as e:
        return parse_judge_label(e.raw)
    finally:
        llm.log.drain()  # labels are the bench's records; the call log would only grow


# LongMemEval's rules, one per question type (and one for abstention), in our words.
_RULES = {
    "default": "Answer yes if the response contains the correct answer or is equivalent to it, and no if it is wrong or only partly right.",
    "temporal-reasoning": "Answer yes if the response contains the correct answer. A count of days, "
    "weeks or months that is off by one from the correct answer still counts as yes.",
    "knowledge-update": "The information changed over time; the correct answer is the latest value. "
    "Answer yes if the response gives the updated value, even if it also mentions older ones.",
    "single-session-preference": "The correct answer is a rubric describing what the user would want. "
    "Answer yes if the response uses the user's own information and preferences correctly; it need "
    "not cover every point of the rubric.",
    "abstention": "This question cannot be answered from the conversation. Answer yes if the response "
    "says that it cannot be answered or that the information is not known, and no if it gives an answer.",
}


def longmemeval_rule(question_type: str, abstention: bool) -> str:
    return _RULES["abstention"] if abstention else _RULES.get(question_type, _RULES["default"])


def judge_longmemeval(llm: StructuredLLM, question_type: str, abstention: bool, question: str, gold: str, prediction: str) -> bool | None:
    messages = [
        {"role": "system", "content": "You check answers to questions about a user's chat history. Answer with JSON only."},
        {
            "role": "user",
            "content": f"{longmemeval_rule(question_type, abstention)}\n\nQuestion: {question}\n"
            f"Correct answer: {gold}\nResponse: {prediction}\n\nIs the response correct? yes or no.",
        },
    ]
    try:
        return llm.complete(messages, schema=YesNo, stage=stages.JUDGE_YES_NO).value.answer == "yes"
    except LLMOutputError as e:
        return parse_yes_no(e.raw)
    finally:
        llm.log.drain()
