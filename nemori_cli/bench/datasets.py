"""Benchmark questions: LoCoMo QA items scoped to ingested sessions, and LongMemEval records.

Conversations themselves are read by importers/locomo.py (LoCoMo) or here
(LongMemEval, whose sessions come with their own dates); this module adds
the questions and what they are scored against.
"""

from __future__ import annotations

import json
import re
import typing
from dataclasses import dataclass
from datetime import datetime, timedelta

from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import InputError
from nemori_cli.importers.locomo import load_locomo_samples
from nemori_cli.importers.longmemeval import parse_date

# Evidence ids are "D<session>:<turn>"; a few in the official file are
# malformed ("D8:6; D9:17" in one string), so ids are found, not split.
_EVIDENCE = re.compile(r"D(\d+):(\d+)")


@dataclass(frozen=True)
class LocomoQuestion:
    sample_id: str
    index: int  # position in the sample's qa list: a stable id for reports and resuming
    question: str
    answer: str  # the gold answer as text (ints are common); category 5: the adversarial answer
    category: int
    evidence: tuple[str, ...]  # dia_ids, normalised

    @property
    def sessions(self) -> set[int]:
        return {_session_of(e) for e in self.evidence}


def _session_of(dia_id: str) -> int:
    m = _EVIDENCE.fullmatch(dia_id)
    if m is None:  # evidence_ids() writes every id as D<session>:<turn>
        raise ValueError(f"not a LoCoMo dia_id: {dia_id!r}")
    return int(m.group(1))


def evidence_ids(raw: typing.Iterable[str]) -> tuple[str, ...]:
    found = [f"D{s}:{t}" for item in raw for s, t in _EVIDENCE.findall(str(item))]
    return tuple(dict.fromkeys(found))


def locomo_questions(
    stream: typing.BinaryIO,
    source_name: str,
    sample_id: str,
    sessions: tuple[int, int] | None = None,
    *,
    include_adversarial: bool = False,
) -> list[LocomoQuestion]:
    """The sample's questions whose evidence lies inside ``sessions`` (all sessions when None).

    A question with no usable evidence id can only be placed when no session
    range is asked for. Category 5 (adversarial) is left out unless asked
    for, as the Nemori and Mem0 evaluations do.
    """
    samples = {str(s["sample_id"]): s for s in load_locomo_samples(stream, source_name)}
    if sample_id not in samples:
        raise InputError(f"{source_name}: no sample {sample_id!r}; samples: {', '.join(samples)}")
    out = []
    for index, item in enumerate(samples[sample_id].get("qa", [])):
        category = int(item.get("category", 0))
        if category == 5 and not include_adversarial:
            continue
        gold = item.get("answer", item.get("adversarial_answer"))
        if gold is None or "question" not in item:
            raise InputError(f"{source_name}: {sample_id} question {index} has no question or answer")
        q = LocomoQuestion(sample_id, index, str(item["question"]), str(gold), category, evidence_ids(item.get("evidence", [])))
        if sessions is not None:
            lo, hi = sessions
            if not q.evidence or not all(lo <= s <= hi for s in q.sessions):
                continue
        out.append(q)
    return out


@dataclass(frozen=True)
class LongMemEvalItem:
    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: datetime
    sessions: tuple[tuple[str, datetime, tuple[IncomingMessage, ...]], ...]  # (session id, date, messages), in order
    evidence: tuple[str, ...] = ()  # source ids of the turns marked has_answer

    @property
    def abstention(self) -> bool:
        return self.question_id.endswith("_abs")


def parse_longmemeval_date(value: str) -> datetime:
    """'2023/05/30 (Tue) 23:40' -> datetime(2023, 5, 30, 23, 40); the weekday is dropped (importers/longmemeval.py reads it)."""
    try:
        return parse_date(value)
    except ValueError:
        raise InputError(f"not a LongMemEval date: {value!r} (expected like '2023/05/30 (Tue) 23:40')") from None


def longmemeval_items(stream: typing.BinaryIO, source_name: str) -> list[LongMemEvalItem]:
    """Every record, each with its sessions as messages (a session's turns one second apart, in order)."""
    try:
        data = json.load(stream)
    except ValueError as e:
        raise InputError(f"{source_name}: not JSON ({e})") from None
    if not isinstance(data, list):
        raise InputError(f"{source_name}: expected a JSON list of LongMemEval records")
    return [_item(record, i, source_name) for i, record in enumerate(data)]


def _item(record: dict, i: int, source_name: str) -> LongMemEvalItem:
    try:
        dates = record["haystack_dates"]
        ids = record["haystack_session_ids"]
        sessions = record["haystack_sessions"]
        if not len(dates) == len(ids) == len(sessions):
            raise InputError(f"{source_name}: record {i}: haystack lists differ in length")
        built = []
        evidence: list[str] = []
        for session_id, date, turns in zip(ids, dates, sessions):
            start = parse_longmemeval_date(date)
            messages = tuple(
                IncomingMessage(
                    speaker=turn["role"],
                    content=turn["content"],
                    timestamp=start + timedelta(seconds=n),
                    source_id=f"{session_id}:{n}",
                    session=str(session_id),
                )
                for n, turn in enumerate(turns)
            )
            built.append((str(session_id), start, messages))
            evidence.extend(f"{session_id}:{n}" for n, turn in enumerate(turns) if turn.get("has_answer"))
        return LongMemEvalItem(
            question_id=str(record["question_id"]),
            question_type=str(record["question_type"]),
            question=str(record["question"]),
            answer=str(record["answer"]),
            question_date=parse_longmemeval_date(record["question_date"]),
            sessions=tuple(built),
            evidence=tuple(evidence),
        )
    except (KeyError, TypeError) as e:
        raise InputError(f"{source_name}: record {i} lacks a LongMemEval field ({e})") from None
