"""LongMemEval records to IncomingMessages: a record's haystack sessions, each a conversation with its date.

The file is a JSON list of records {question_id, haystack_session_ids,
haystack_dates, haystack_sessions: [[{role, content}, ...], ...]}. One record
is one user's history, so one is read: --conversation names it by
question_id (several may be named), and a file of several records with none
named is refused with some of their ids, as LoCoMo's reader does for samples.

A session's turns get its date plus n seconds: the dates are to the minute,
and distinct increasing times keep the order. Times are naive: LongMemEval
gives no zone. Ids are ``<session id>:<n>``, as the benchmark scores them;
the session is the haystack session id. Records share haystack sessions, so
a session already read from an earlier chosen record is left out (counted as
"repeated session") rather than refused as a repeated id.
"""

from __future__ import annotations

import re
import typing
from datetime import datetime, timedelta

from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import InputError
from nemori_cli.importers.collect import Collector, Imported
from nemori_cli.importers.common import kind, quote
from nemori_cli.importers.jsonstream import JsonStream
from nemori_cli.importers.selection import Selection

FORMAT = "longmemeval"
NAMESPACE = "longmemeval:"
EXPECTED = "expected LongMemEval records (a JSON list of {question_id, haystack_dates, haystack_sessions})"
DATE_EXAMPLE = "'2023/05/30 (Tue) 23:40'"
_DATE = re.compile(r"(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})")
_LISTED = 5


def parse_date(value: str) -> datetime:
    """'2023/05/30 (Tue) 23:40' -> datetime(2023, 5, 30, 23, 40); the weekday is not checked. Raises ValueError."""
    m = _DATE.fullmatch(value.strip()) if isinstance(value, str) else None
    if m is None:
        raise ValueError(f"not a LongMemEval date: {quote(value)} (expected like {DATE_EXAMPLE})")
    year, month, day, hour, minute = (int(g) for g in m.groups())
    return datetime(year, month, day, hour, minute)  # raises ValueError for 2023/02/30


def read(stream: typing.BinaryIO, source: str, selection: Selection = Selection()) -> Imported:
    out = Collector(source, FORMAT, "LongMemEval", selection, NAMESPACE)
    json = JsonStream(stream, source, EXPECTED)
    ids: list[str] = []
    read_one = False
    sessions: set[str] = set()
    for index, record in json.items("record"):
        where = f"{source}: record {index}"
        if not isinstance(record, dict):
            raise InputError(f"{where}: {kind(record)}, not an object; {EXPECTED}")
        qid = record.get("question_id")
        if isinstance(qid, bool) or not isinstance(qid, (str, int)):
            raise InputError(f"{where}: no 'question_id'; {EXPECTED}")
        qid = str(qid)
        ids.append(qid)
        if not selection.conversations and read_one:
            continue  # several records and none chosen: only their ids are wanted now, for the error
        if out.wants(qid, None):
            _record(out, record, f"{where} ({quote(qid, 40)})", sessions)
            read_one = True
    if not selection.conversations and len(ids) > 1:
        listed = ", ".join(quote(i, 30) for i in ids[:_LISTED]) + (f" and {len(ids) - _LISTED} more" if len(ids) > _LISTED else "")
        raise InputError(f"{source}: holds {len(ids)} records; expected --conversation QUESTION_ID to choose one ({listed})")
    return out.result()


def _record(out: Collector, record: dict, where: str, done: set[str]) -> None:
    ids, dates, sessions = (record.get(k) for k in ("haystack_session_ids", "haystack_dates", "haystack_sessions"))
    if not (isinstance(ids, list) and isinstance(dates, list) and isinstance(sessions, list)):
        raise InputError(f"{where}: no haystack_session_ids, haystack_dates and haystack_sessions lists; {EXPECTED}")
    if not len(ids) == len(dates) == len(sessions):
        raise InputError(f"{where}: {len(ids)} session ids, {len(dates)} dates and {len(sessions)} sessions; expected as many of each")
    for session_id, date, turns in zip(ids, dates, sessions):
        if isinstance(session_id, bool) or not isinstance(session_id, (str, int)):
            raise InputError(f"{where}: a session id is {quote(session_id)}; expected a string")
        session_id = str(session_id)
        at = f"{where} session {quote(session_id, 40)}"
        try:
            start = parse_date(date)
        except ValueError:
            raise InputError(f"{at}: the date is {quote(date)}; expected a date like {DATE_EXAMPLE}") from None
        if not isinstance(turns, list):
            raise InputError(f"{at}: {kind(turns)}, not a list of turns; expected [{{role, content}}, ...]")
        if session_id in done:
            out.skip("repeated session", len(turns))
            continue
        done.add(session_id)
        for n, turn in enumerate(turns):
            _turn(out, turn, f"{at} turn {n}", session_id, start, n)


def _turn(out: Collector, turn: object, at: str, session_id: str, start: datetime, n: int) -> None:
    if not isinstance(turn, dict) or not isinstance(turn.get("role"), str) or not isinstance(turn.get("content"), str):
        raise InputError(f"{at}: expected {{role, content}} with string values")
    if turn["role"] not in ("user", "assistant"):
        out.skip("system" if turn["role"] == "system" else "other role")
        return
    if not turn["content"].strip():
        out.skip("empty")
        return
    try:
        timestamp = start + timedelta(seconds=n)
    except OverflowError:
        raise InputError(f"{at}: its time (the session's date plus {n} seconds) is past the year 9999") from None
    out.add(IncomingMessage(turn["role"], turn["content"], timestamp, source_id=f"{session_id}:{n}", session=session_id), at)
