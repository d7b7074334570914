"""Turn input files into IncomingMessages: JSON Lines and LoCoMo.

Every problem a user can cause becomes one InputError line that names the
source (and, for JSONL, the 1-based line), what is wrong and what is expected,
so the CLI can print it as is. Readers take bytes, not text, so an encoding
problem is reported where it is instead of as a decoder traceback.

JSONL: one object per line, blank lines skipped. ``speaker`` (alias ``role``),
``content`` (alias ``text``), ``timestamp`` (ISO 8601; a trailing Z means UTC),
optional ``id`` and ``session`` (string or integer). Other fields are ignored.
The timestamp has no aliases on purpose: guessing at ``time``/``date`` would
silently accept files whose times mean something else.
"""

from __future__ import annotations

import json
import re
import typing
from datetime import datetime, timedelta

from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import InputError
from nemori_cli.importers.common import decode as _decode
from nemori_cli.importers.common import parse_iso as parse_timestamp
from nemori_cli.importers.common import quote as _quote
from nemori_cli.importers.common import valid_text as _valid_text

_BOM = b"\xef\xbb\xbf"
_TS_EXAMPLE = "ISO 8601, e.g. 2023-05-08T13:56:00"
_ONE_OBJECT = "expected one JSON object per line"
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
_JSON_KINDS = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


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


def _loads(text: str) -> object:
    """json.loads, with what it raises besides JSONDecodeError made into a ValueError with a short reason."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError:  # e.g. an integer of more than 4300 digits
        raise ValueError("a number too long to read") from None


def _opt_key(obj: dict, name: str, where: str) -> str | None:
    """id/session: a string or an integer (bool is not a number here)."""
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and value.strip():
        return _valid_text(value, where, name)
    raise InputError(f"{where}: '{name}' is {_quote(value)}; expected a non-empty string or an integer")


def _text_field(obj: dict, names: tuple[str, str], where: str, what: str) -> str:
    key = names[0] if names[0] in obj else names[1]
    if key not in obj:
        raise InputError(f"{where}: no '{names[0]}' (or '{names[1]}'); each line needs {what}")
    value = obj[key]
    if not isinstance(value, str):
        raise InputError(f"{where}: '{key}' is {_quote(value)}; expected a string")
    if not value.strip():
        raise InputError(f"{where}: '{key}' is empty; expected {what}")
    return _valid_text(value, where, key)


def read_jsonl(stream: typing.BinaryIO, source_name: str, *, default_timestamp: datetime | None = None) -> list[IncomingMessage]:
    """Read JSON Lines; ``default_timestamp`` fills only missing timestamps."""
    messages: list[IncomingMessage] = []
    seen_ids: dict[str, int] = {}
    for lineno, raw in enumerate(stream, 1):
        where = f"{source_name}:{lineno}"
        if lineno == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM) :]  # editors on Windows add one; it is not content
        text = _decode(raw.rstrip(b"\r\n"), source_name, lineno)
        if not text.strip():
            continue
        try:
            obj = _loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{where}: not valid JSON ({e.msg} at column {e.colno}); {_ONE_OBJECT}") from None
        except ValueError as e:
            raise InputError(f"{where}: not usable JSON ({e}); {_ONE_OBJECT}") from None
        if not isinstance(obj, dict):
            kind = _JSON_KINDS.get(type(obj), "value")
            raise InputError(f"{where}: a JSON {kind}, not an object; {_ONE_OBJECT}")
        speaker = _text_field(obj, ("speaker", "role"), where, "a speaker name")
        content = _text_field(obj, ("content", "text"), where, "the message text")
        stamp = obj.get("timestamp")
        if stamp is None:
            if default_timestamp is None:
                raise InputError(f"{where}: no 'timestamp' ({_TS_EXAMPLE}); pass --default-timestamp to supply one")
            timestamp = default_timestamp
        else:
            try:
                if not isinstance(stamp, str):
                    raise ValueError
                timestamp = parse_timestamp(stamp)
            except ValueError:
                raise InputError(f"{where}: 'timestamp' {_quote(stamp)} is not a date-time; expected {_TS_EXAMPLE}") from None
        source_id = _opt_key(obj, "id", where)
        if source_id is not None:
            if source_id in seen_ids:
                raise InputError(
                    f"{where}: id {_quote(source_id)} already used on line {seen_ids[source_id]}; expected ids unique within one input"
                )
            seen_ids[source_id] = lineno
        messages.append(
            IncomingMessage(
                speaker=speaker,
                content=content,
                timestamp=timestamp,
                source_id=source_id,
                session=_opt_key(obj, "session", where),
                line=lineno,
            )
        )
    if not messages:
        raise InputError(f"{source_name}: no messages (empty input)")
    return messages


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
