"""Read LoCoMo files (a JSON list of samples, each a conversation in dated sessions) into IncomingMessages.

Every problem a user can cause becomes one InputError line that names the
source (and the sample, session and turn), what is wrong and what is
expected, so the CLI can print it as is. The reader takes bytes, not text, so
an encoding problem is reported where it is instead of as a decoder traceback.
``--sessions A-B`` (parse_session_range, in_sessions) keeps some sessions only.
"""

from __future__ import annotations

import json
import re
import typing
from datetime import datetime, timedelta

from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import InputError
from nemori_cli.importers.common import decode as _decode
from nemori_cli.importers.common import loads as _loads
from nemori_cli.importers.common import quote as _quote
from nemori_cli.importers.common import valid_text as _valid_text

_BOM = b"\xef\xbb\xbf"
_LOCOMO_FILE = "expected a LoCoMo file (a JSON list of samples)"
_LOCOMO_DATE = "expected a date like '1:56 pm on 8 May, 2023'"
_TURN = "expected {speaker, dia_id, text}"
_LOCOMO_DT = re.compile(r"(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([a-z]+),?\s+(\d{4})", re.I)
# Month names spelled out here rather than via strptime's %B, which follows
# the process locale and would break on a non-English machine.
_MONTHS = {
    m: i
    for i, name in enumerate(
        ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"],
        1,
    )
    for m in (name, name[:3])
}
# ASCII digits only, and few enough for int(): the number orders the sessions,
# the key itself (session_01 stays session_01) is what is read.
_SESSION_KEY = re.compile(r"session_([0-9]{1,9})")


def parse_locomo_datetime(value: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> naive datetime(2023, 5, 8, 13, 56).

    Naive because LoCoMo gives no zone; inventing one would shift the times.
    """
    m = _LOCOMO_DT.fullmatch(value.strip())
    if not m:
        raise ValueError(f"{_quote(value)} is not a LoCoMo date; {_LOCOMO_DATE}")
    hour, minute, ampm, day, month_name, year = m.groups()
    hour, minute = int(hour), int(minute)
    month = _MONTHS.get(month_name.lower())
    if month is None or not 1 <= hour <= 12:
        raise ValueError(f"{_quote(value)} is not a LoCoMo date; {_LOCOMO_DATE}")
    hour = hour % 12 + (12 if ampm.lower() == "p" else 0)  # 12 am is 0h, 12 pm is 12h
    return datetime(int(year), month, int(day), hour, minute)


def load_locomo_samples(stream: typing.BinaryIO, source_name: str) -> list[dict]:
    raw = stream.read()
    text = _decode(raw[len(_BOM) :] if raw.startswith(_BOM) else raw, source_name)
    try:
        data = _loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{source_name}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno}); {_LOCOMO_FILE}") from None
    except ValueError as e:
        raise InputError(f"{source_name}: not usable JSON ({e}); {_LOCOMO_FILE}") from None
    if not isinstance(data, list) or not data:
        raise InputError(f"{source_name}: top level is not a non-empty JSON list; {_LOCOMO_FILE}")
    for i, sample in enumerate(data):
        if not isinstance(sample, dict) or "sample_id" not in sample:
            raise InputError(f"{source_name}: item {i} has no 'sample_id'; {_LOCOMO_FILE}")
        if not isinstance(sample.get("conversation"), dict):
            name = _quote(str(sample["sample_id"]))
            raise InputError(f"{source_name}: sample {name} has no 'conversation'; {_LOCOMO_FILE}")
    return data


def list_locomo_samples(stream: typing.BinaryIO, source_name: str = "<input>") -> list[str]:
    """The sample ids in a LoCoMo file, in file order."""
    return [str(s["sample_id"]) for s in load_locomo_samples(stream, source_name)]


def read_locomo(stream: typing.BinaryIO, source_name: str, *, sample_id: str | None) -> list[IncomingMessage]:
    """Read one LoCoMo sample's sessions in order.

    Turns get their session's time plus i seconds: LoCoMo dates sessions to the
    minute only, and distinct increasing times keep the order explicit without
    moving any turn out of its minute (sessions have far fewer than 60 turns).
    """
    samples = load_locomo_samples(stream, source_name)
    ids = [str(s["sample_id"]) for s in samples]
    # quoted when an id holds a newline, or is empty or padded (the message would end in a blank)
    available = ", ".join(i if i.isprintable() and i == i.strip() and i else _quote(i, 40) for i in ids)
    if sample_id is None:
        if len(samples) != 1:
            raise InputError(f"{source_name}: holds {len(samples)} samples; expected a sample id to choose one ({available})")
        sample = samples[0]
    elif ids.count(sample_id) == 1:
        sample = samples[ids.index(sample_id)]
    elif sample_id in ids:
        raise InputError(f"{source_name}: sample id {_quote(sample_id)} appears more than once")
    else:
        raise InputError(f"{source_name}: no sample {_quote(sample_id)}; available: {available}")

    conv = sample["conversation"]
    where = f"{source_name}: sample {_quote(str(sample['sample_id']))}"
    # Some samples carry more session_N_date_time keys than sessions; only the
    # session lists themselves decide what is read.
    numbers = sorted((int(m.group(1)), k) for k in conv if (m := _SESSION_KEY.fullmatch(k)))
    if not numbers:
        raise InputError(f"{where} has no session_N lists; expected a LoCoMo conversation")
    messages: list[IncomingMessage] = []
    seen_ids: dict[str, str] = {}
    for n, key in numbers:
        date_key = f"{key}_date_time"
        turns = conv[key]
        if not isinstance(turns, list):
            raise InputError(f"{where} {key} is not a list; expected a list of turns")
        date = conv.get(date_key)
        if not isinstance(date, str):
            raise InputError(f"{where} {key} has no '{date_key}'; {_LOCOMO_DATE}")
        try:
            start = parse_locomo_datetime(date)
        except ValueError:
            raise InputError(f"{where} '{date_key}' is {_quote(date)}; {_LOCOMO_DATE}") from None
        for i, turn in enumerate(turns):
            at = f"{where} {key} turn {i + 1}"
            if not isinstance(turn, dict):
                raise InputError(f"{at} is not an object; {_TURN}")
            for field in ("speaker", "dia_id", "text"):
                if not isinstance(turn.get(field), str):
                    raise InputError(f"{at}: '{field}' missing or not a string; {_TURN}")
                _valid_text(turn[field], at, field)
            content = turn["text"]
            caption = turn.get("blip_caption")
            if isinstance(caption, str):
                _valid_text(caption, at, "blip_caption")
            if isinstance(caption, str) and caption.strip():
                # Image turns often say only "look at this"; the caption is the content.
                content = f"{content} [shares a photo: {caption.strip()}]".strip()
            if not content.strip() or not turn["speaker"].strip():
                raise InputError(f"{at}: empty speaker or text; expected a speaker and some text")
            # One dia_id is one message's identity: a second one would be dropped unseen when stored.
            if turn["dia_id"] in seen_ids:
                raise InputError(
                    f"{at}: dia_id {_quote(turn['dia_id'])} already used in {seen_ids[turn['dia_id']]};"
                    " expected dia_ids unique within one sample"
                )
            seen_ids[turn["dia_id"]] = f"{key} turn {i + 1}"
            try:
                timestamp = start + timedelta(seconds=i)
            except OverflowError:
                raise InputError(f"{at}: its time ({key}'s date plus {i} seconds) is past the year 9999") from None
            messages.append(
                IncomingMessage(
                    speaker=turn["speaker"],
                    content=content,
                    timestamp=timestamp,
                    source_id=turn["dia_id"],
                    session=str(n),
                )
            )
    if not messages:
        raise InputError(f"{where}: no messages (all sessions are empty)")
    return messages


def parse_session_range(value: str | None) -> tuple[int, int] | None:
    """'--sessions 1-5' -> (1, 5); '3' -> (3, 3); None or '' -> None (all sessions)."""
    if not value:
        return None
    from nemori_cli.errors import ConfigError

    try:
        first, _, last = value.partition("-")
        lo, hi = int(first), int(last or first)
    except ValueError:
        raise ConfigError(f"--sessions {value!r}: expected N or A-B, e.g. 1-5") from None
    if lo < 1 or hi < lo:
        raise ConfigError(f"--sessions {value!r}: expected 1 <= A <= B")
    return lo, hi


def in_sessions(messages: list[IncomingMessage], span: tuple[int, int], source_name: str) -> list[IncomingMessage]:
    """The LoCoMo messages of sessions A..B; none at all is an error naming the file."""
    lo, hi = span
    chosen = [m for m in messages if m.session is not None and lo <= int(m.session) <= hi]
    if not chosen:
        raise InputError(f"{source_name}: no messages in sessions {lo}-{hi}")
    return chosen
