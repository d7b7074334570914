"""Readers: JSONL and LoCoMo inputs become IncomingMessages or one-line InputErrors."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from nemori_cli.errors import InputError
from nemori_cli.importers.jsonl import parse_timestamp, read_jsonl
from nemori_cli.importers.locomo import list_locomo_samples, parse_locomo_datetime, read_locomo

SRC = "chat.jsonl"
LOCOMO_DEV = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo-dev.json"  # ../shared beside the checkout


def jsonl(*lines: str | dict | bytes) -> io.BytesIO:
    parts = []
    for line in lines:
        if isinstance(line, dict):
            line = json.dumps(line)
        parts.append(line if isinstance(line, bytes) else line.encode("utf-8"))
    return io.BytesIO(b"\n".join(parts) + b"\n")


def msg(**fields) -> dict:
    base = {"speaker": "Ann", "content": "hello", "timestamp": "2023-05-08T13:56:00"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def error_of(stream, **kwargs) -> str:
    with pytest.raises(InputError) as info:
        read_jsonl(stream, SRC, **kwargs)
    text = info.value.message
    assert "\n" not in text, "errors must be one line"
    return text


# --- JSONL: good input -------------------------------------------------------


def test_reads_fields_and_line_numbers_skipping_blank_lines():
    out = read_jsonl(jsonl(msg(id="a", session=1), "", "   ", msg(speaker="Bob", content="hi", id=7)), SRC)
    assert [(m.speaker, m.content, m.source_id, m.session, m.line) for m in out] == [
        ("Ann", "hello", "a", "1", 1),
        ("Bob", "hi", "7", None, 4),
    ]
    assert out[0].timestamp == datetime(2023, 5, 8, 13, 56)


def test_aliases_role_and_text_and_extra_fields_ignored():
    line = {"role": "user", "text": "yo", "timestamp": "2023-05-08T13:56:00", "mood": "ok"}
    (m,) = read_jsonl(jsonl(line), SRC)
    assert (m.speaker, m.content) == ("user", "yo")


def test_z_timestamp_is_utc_aware_and_naive_stays_naive():
    out = read_jsonl(
        jsonl(
            msg(timestamp="2023-05-08T13:56:00Z"),
            msg(timestamp="2023-05-08T13:56:00"),
            msg(timestamp="2023-05-08T13:56:00+02:00"),
        ),
        SRC,
    )
    assert out[0].timestamp == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert out[0].timestamp.tzinfo is not None
    assert out[1].timestamp.tzinfo is None
    assert out[2].timestamp.utcoffset() == timedelta(hours=2)


def test_default_timestamp_fills_only_missing_ones():
    default = datetime(2024, 1, 1, 9, 0)
    out = read_jsonl(jsonl(msg(timestamp=None), msg()), SRC, default_timestamp=default)
    assert out[0].timestamp == default
    assert out[1].timestamp == datetime(2023, 5, 8, 13, 56)


def test_utf8_bom_and_crlf_are_accepted():
    data = b"\xef\xbb\xbf" + json.dumps(msg()).encode() + b"\r\n" + json.dumps(msg()).encode()
    out = read_jsonl(io.BytesIO(data), SRC)
    assert [m.line for m in out] == [1, 2]


# --- JSONL: errors -----------------------------------------------------------


def test_not_utf8_names_line_byte_and_column():
    text = error_of(jsonl(msg(), b'{"speaker": "A\xff"}'))
    assert text.startswith(f"{SRC}:2: not UTF-8 text (byte 0xff at column 15)")


def test_malformed_json_names_line_and_json_error():
    text = error_of(jsonl(msg(), "", '{"speaker": "Ann",'))
    assert text.startswith(f"{SRC}:3: not valid JSON (")
    assert "column" in text and "one JSON object per line" in text


@pytest.mark.parametrize("line,kind", [("[1, 2]", "array"), ('"hi"', "string"), ("3", "number")])
def test_json_that_is_not_an_object(line, kind):
    text = error_of(jsonl(msg(), line))
    assert text.startswith(f"{SRC}:2: a JSON {kind}, not an object")


@pytest.mark.parametrize(
    "fields,missing",
    [({"speaker": None}, "'speaker' (or 'role')"), ({"content": None}, "'content' (or 'text')")],
)
def test_missing_speaker_or_content_is_named(fields, missing):
    text = error_of(jsonl(msg(), msg(), msg(**fields)))
    assert text.startswith(f"{SRC}:3: no {missing}")


@pytest.mark.parametrize("content", ["", "   "])
def test_empty_content(content):
    text = error_of(jsonl(msg(content=content)))
    assert text.startswith(f"{SRC}:1: 'content' is empty")


@pytest.mark.parametrize(
    "fields,key",
    [
        ({"speaker": 5}, "speaker"),
        ({"content": ["x"]}, "content"),
        ({"speaker": None, "role": 3}, "role"),
    ],
)
def test_non_string_speaker_or_content(fields, key):
    text = error_of(jsonl(msg(**fields)))
    assert text.startswith(f"{SRC}:1: '{key}' is ")
    assert "expected a string" in text


def test_missing_timestamp_says_how_to_fix():
    text = error_of(jsonl(msg(), msg(timestamp=None)))
    assert text == (f"{SRC}:2: no 'timestamp' (ISO 8601, e.g. 2023-05-08T13:56:00); pass --default-timestamp to supply one")


@pytest.mark.parametrize("value", ["yesterday", "2023-13-01T00:00:00", 1683554160, ""])
def test_unparseable_timestamp_quotes_value(value):
    text = error_of(jsonl(msg(timestamp=value)))
    assert text.startswith(f"{SRC}:1: 'timestamp' {value!r} is not a date-time")


def test_time_and_date_are_not_timestamp_aliases():
    line = {"speaker": "Ann", "content": "x", "time": "2023-05-08T13:56:00"}
    assert "no 'timestamp'" in error_of(jsonl(line))


@pytest.mark.parametrize("lines", [(), ("",), ("", "  ", "\t")])
def test_empty_input(lines):
    stream = io.BytesIO("\n".join(lines).encode())
    assert error_of(stream) == f"{SRC}: no messages (empty input)"


def test_duplicate_ids_name_both_lines():
    text = error_of(jsonl(msg(id="x"), msg(id=1), "", msg(id="x")))
    assert text.startswith(f"{SRC}:4: id 'x' already used on line 1")


def test_int_and_string_ids_collide_after_str():
    text = error_of(jsonl(msg(id=1), msg(id="1")))
    assert text.startswith(f"{SRC}:2: id '1' already used on line 1")


@pytest.mark.parametrize("field", ["id", "session"])
@pytest.mark.parametrize("value", [1.5, True, ["a"], ""])
def test_bad_id_or_session_type(field, value):
    text = error_of(jsonl(msg(**{field: value})))
    assert text.startswith(f"{SRC}:1: '{field}' is ")


def test_long_values_are_cut_and_kept_on_one_line():
    text = error_of(jsonl(msg(timestamp="bad\n" * 100)))
    assert len(text) < 200


# --- timestamp parsers -------------------------------------------------------


def test_parse_timestamp():
    assert parse_timestamp("2023-05-08T13:56:00Z").tzinfo == UTC
    assert parse_timestamp("2023-05-08 13:56") == datetime(2023, 5, 8, 13, 56)
    for bad in ("", "Z", "May 8"):
        with pytest.raises(ValueError):
            parse_timestamp(bad)


@pytest.mark.parametrize(
    "value,expected",
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9)),
        ("12:30 pm on 1 January, 2024", datetime(2024, 1, 1, 12, 30)),
        ("10:31 AM on 13 Oct 2023", datetime(2023, 10, 13, 10, 31)),
    ],
)
def test_parse_locomo_datetime(value, expected):
    got = parse_locomo_datetime(value)
    assert got == expected and got.tzinfo is None


@pytest.mark.parametrize("value", ["13:00 pm on 8 May, 2023", "1:56 pm on 8 Mayo, 2023", "1:56 pm on 31 June, 2023", "8 May 2023"])
def test_parse_locomo_datetime_rejects(value):
    with pytest.raises(ValueError):
        parse_locomo_datetime(value)


# --- LoCoMo ------------------------------------------------------------------

LSRC = "locomo.json"
MAY8 = "1:56 pm on 8 May, 2023"


def sample(sample_id="s1", **conversation) -> dict:
    conv = {"speaker_a": "A", "speaker_b": "B"}
    conv.update(conversation)
    return {"sample_id": sample_id, "conversation": conv, "qa": []}


def turns(n: int, session: int = 1) -> list[dict]:
    return [{"speaker": "AB"[i % 2], "dia_id": f"D{session}:{i + 1}", "text": f"t{i}"} for i in range(n)]


def locomo(data) -> io.BytesIO:
    return io.BytesIO(json.dumps(data).encode())


def locomo_error(data, sample_id=None, raw: bytes | None = None) -> str:
    stream = io.BytesIO(raw) if raw is not None else locomo(data)
    with pytest.raises(InputError) as info:
        read_locomo(stream, LSRC, sample_id=sample_id)
    text = info.value.message
    assert "\n" not in text and text.startswith(LSRC)
    return text


def test_locomo_sessions_sorted_numerically_with_second_offsets():
    data = [
        sample(
            session_10=turns(1, 10),
            session_10_date_time="9:00 am on 2 June, 2023",
            session_2=turns(3, 2),
            session_2_date_time="1:56 pm on 8 May, 2023",
            session_11_date_time="9:00 am on 3 June, 2023",  # a date without a session is ignored
        )
    ]
    out = read_locomo(locomo(data), LSRC, sample_id=None)
    assert [m.source_id for m in out] == ["D2:1", "D2:2", "D2:3", "D10:1"]
    assert [m.session for m in out] == ["2", "2", "2", "10"]
    assert [m.timestamp.second for m in out] == [0, 1, 2, 0]
    assert out[3].timestamp == datetime(2023, 6, 2, 9, 0)


def test_locomo_caption_is_appended():
    t = {"speaker": "A", "dia_id": "D1:1", "text": "look", "blip_caption": "a photo of a dog"}
    image_only = {"speaker": "B", "dia_id": "D1:2", "text": "", "blip_caption": "a cat"}
    data = [sample(session_1=[t, image_only], session_1_date_time="1:56 pm on 8 May, 2023")]
    out = read_locomo(locomo(data), LSRC, sample_id="s1")
    assert out[0].content == "look [shares a photo: a photo of a dog]"
    assert out[1].content == "[shares a photo: a cat]"


def test_locomo_sample_selection_errors():
    data = [
        sample("a", session_1=turns(1), session_1_date_time="1:56 pm on 8 May, 2023"),
        sample("b", session_1=turns(1), session_1_date_time="1:56 pm on 8 May, 2023"),
    ]
    assert "holds 2 samples" in locomo_error(data) and "(a, b)" in locomo_error(data)
    text = locomo_error(data, sample_id="zzz")
    assert "no sample 'zzz'" in text and "available: a, b" in text
    assert read_locomo(locomo(data), LSRC, sample_id="b")[0].source_id == "D1:1"
    assert list_locomo_samples(locomo(data)) == ["a", "b"]


def test_locomo_session_without_date():
    data = [sample(session_1=turns(2), session_1_date_time="1:56 pm on 8 May, 2023", session_2=turns(2, 2))]
    text = locomo_error(data)
    assert "session_2 has no 'session_2_date_time'" in text


def test_locomo_bad_date():
    text = locomo_error([sample(session_1=turns(1), session_1_date_time="sometime")])
    assert "'session_1_date_time' is 'sometime'" in text


def test_locomo_invalid_json_names_line():
    text = locomo_error(None, raw=b'[\n{"sample_id": "a",\n  oops}\n]')
    assert text.startswith(f"{LSRC}:3: not valid JSON")


def test_locomo_not_utf8():
    text = locomo_error(None, raw=b'[\n{"sample_id": "\xff"}]')
    assert text.startswith(f"{LSRC}:2: not UTF-8 text (byte 0xff at column 16)")


@pytest.mark.parametrize(
    "data,needle",
    [
        ({"sample_id": "a"}, "not a non-empty JSON list"),
        ([], "not a non-empty JSON list"),
        ([{"conversation": {}}], "item 0 has no 'sample_id'"),
        ([{"sample_id": "a", "conversation": []}], "has no 'conversation'"),
        ([sample()], "has no session_N lists"),
        ([sample(session_1="x", session_1_date_time=MAY8)], "is not a list"),
        ([sample(session_1=["x"], session_1_date_time=MAY8)], "turn 1 is not an object"),
        (
            [sample(session_1=[{"speaker": "A", "text": "t"}], session_1_date_time=MAY8)],
            "turn 1: 'dia_id' missing",
        ),
        (
            [sample(session_1=[{"speaker": "A", "dia_id": "D", "text": " "}], session_1_date_time=MAY8)],
            "empty speaker or text",
        ),
        ([sample(session_1=[], session_1_date_time=MAY8)], "no messages"),
    ],
)
def test_locomo_wrong_shape(data, needle):
    assert needle in locomo_error(data)


def test_locomo_dev_conv26():
    if not LOCOMO_DEV.exists():
        pytest.skip(f"LoCoMo dev file not present at {LOCOMO_DEV}")
    with LOCOMO_DEV.open("rb") as f:
        out = read_locomo(f, LOCOMO_DEV.name, sample_id="conv-26")
    session1 = [m for m in out if m.session == "1"]
    assert len(session1) == 18
    assert session1[0].source_id == "D1:1"
    assert session1[0].timestamp == datetime(2023, 5, 8, 13, 56, 0)
    assert session1[-1].timestamp == datetime(2023, 5, 8, 13, 56, 17)
    d15 = next(m for m in out if m.source_id == "D1:5")
    assert d15.content.endswith(" [shares a photo: a photo of a dog walking past a wall with a painting of a woman]")
    times = [m.timestamp for m in out]
    assert times == sorted(times), "sessions are read in time order in conv-26"
    with LOCOMO_DEV.open("rb") as f:
        assert list_locomo_samples(f) == ["conv-26", "conv-30", "conv-41", "conv-43"]
