"""Hostile input, proven with property-based tests (hypothesis).

The rule every test here checks: reading either succeeds, and then the
messages round-trip through a real SQLite store unchanged, or it raises
InputError with a one-line message; never any other exception. At the CLI
(`ingest --dry-run`, `--user`, `search`) the same rule reads: exit 0, or
exit 2 with one line on stderr and no traceback, and the database file
byte-identical either way.

Examples per test come from the hypothesis profile (tests/conftest.py):
100 by default, 1000 with HYPOTHESIS_PROFILE=campaign.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from nemori_cli.errors import InputError
from nemori_cli.importers.jsonl import parse_timestamp, read_jsonl
from nemori_cli.importers.locomo import read_locomo
from nemori_cli.store import forget as forget_sql
from nemori_cli.store import messages as message_sql
from nemori_cli.store.sqlite import SqliteStore
from tests.support.cli import run_nemori
from tests.unit.fake_ingest import conversation, use_fakes, write_jsonl

SRC = "hostile.jsonl"
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")  # a failing example's 5000-digit number

# -- strategies -------------------------------------------------------------------
# Each input is either well-formed (with odd Unicode and edge timestamps in it)
# or well-formed with hostile lines or fields mixed in, so that both what is
# read and what is refused get their share of the examples.

SURROGATES = ["\ud800", "\udfff", "\udcff"]
SPECIAL = [
    "\x00",
    "\u200f",
    "\u200e",
    "\u202e",
    "\u2066",
    "\u200b",
    "\ufeff",
    "\u2028",
    "\u2029",
    "\x85",
    "\r",
    "\n",
    "\t",
    "\x0b",
    "\x1b[31m",
    "🙂",
    "👩\u200d👩\u200d👧",
    "🏳️\u200d🌈",
    "e\u0301",
    "\ufdfa",
    "\U0010ffff",
    "\uffff",
    '"',
    "\\",
    "'",
    "{",
    "}",
    " ",
    "%s",
    "NEAR(",
    "*",
]
valid_chars = st.one_of(st.characters(codec="utf-8"), st.sampled_from(SPECIAL))  # utf-8: no lone surrogates
chars = st.one_of(st.characters(), st.sampled_from(SPECIAL), st.sampled_from(SURROGATES), st.integers(0xD800, 0xDFFF).map(chr))
valid_text = st.lists(valid_chars, max_size=30).map("".join)  # pieces, some of several code points (emoji sequences)
some_text = st.lists(valid_chars, min_size=1, max_size=30).map("".join).filter(str.strip)
odd_text = st.one_of(valid_text, valid_text, st.lists(chars, max_size=30).map("".join))  # a third may hold lone surrogates
valid_names = st.one_of(
    st.sampled_from(["Ann", "Bob", "🙂 Ann", "\u202eAnn", "שרה", "محمد", "Ann\u200f", "李雷", "A\x00nn", "👩\u200d👩\u200d👧"]),
    some_text,
)
names = st.one_of(valid_names, st.sampled_from(["Ann\ud800", "\udcff"]), odd_text)
json_leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), odd_text)
json_values = st.recursive(
    json_leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(odd_text, inner, max_size=3), max_leaves=8
)

offsets = st.none() | st.timedeltas(
    min_value=timedelta(hours=-23, minutes=-59, seconds=-59), max_value=timedelta(hours=23, minutes=59, seconds=59)
).map(timezone)
moments = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999), timezones=offsets)


def _z(d: datetime) -> str:
    text = d.isoformat()
    return text.replace("+00:00", "Z") if text.endswith("+00:00") else text


ISO_FORMS = [
    datetime.isoformat,
    lambda d: d.isoformat(sep=" "),
    lambda d: d.isoformat(timespec="minutes"),
    lambda d: d.isoformat(timespec="microseconds"),
    _z,
    lambda d: _z(d).lower(),
    lambda d: f"  {d.isoformat()}  ",
]
EDGE_STAMPS = [
    "2016-12-31T23:59:60Z",
    "2023-12-31T23:59:60",
    "1998-12-31T23:59:60+00:00",  # leap seconds
    "2023-01-01T24:00:00",
    "0000-01-01T00:00:00",
    "10000-01-01T00:00:00",
    "0001-01-01T00:00:00",
    "0001-01-01T00:00:00-23:59",
    "0001-01-01T00:00:00+23:59",
    "9999-12-31T23:59:59.999999",
    "9999-12-31T23:59:59+23:59",
    "9999-12-31T23:59:59-23:59",
    "9999-12-31T23:59:59.9999999",
    "2023-02-29T00:00:00",
    "2024-02-29T00:00:00",
    "2023-05-08T13:56:00+24:00",
    "2023-05-08T13:56:00+05:30:15",
    "2023-05-08",
    "20230508T135600",
    "2023-W19-1",
    "",
    " ",
    "Z",
    "z",
    "T",
    "2023-05-08T13:56:00Z+01:00",
    "2023-05-08T13:56:00\x00",
    "２０２３-05-08T13:56:00",
    "1:56 pm on 8 May, 2023",
    "2023-05-08T13:56:00\ud800",
]


def _parses(text: str) -> bool:
    try:
        parse_timestamp(text)
        return True
    except ValueError:
        return False


good_stamps = st.one_of(
    st.builds(lambda d, form: form(d), moments, st.sampled_from(ISO_FORMS)),
    st.sampled_from([t for t in EDGE_STAMPS if _parses(t)]),
)
stamps = st.one_of(good_stamps, good_stamps, st.sampled_from(EDGE_STAMPS), odd_text, json_leaves)
ids = st.one_of(st.integers(), st.sampled_from(["a", "b", "1", 1, -1, 1.0, True, "", "  ", "id\n2", "\ud800"]), odd_text, json_values)


def _maybe(strategy, junk=json_values):
    """Mostly the field's kind of value, sometimes anything at all."""
    return st.one_of(strategy, strategy, strategy, junk)


@st.composite
def good_messages(draw, index: int = 0) -> dict:
    """A message every reader must take: odd Unicode and edge times, but the right shape."""
    msg = {
        draw(st.sampled_from(["speaker", "role"])): draw(valid_names),
        draw(st.sampled_from(["content", "text"])): draw(some_text),
        "timestamp": draw(good_stamps),
    }
    if draw(st.booleans()):
        msg["id"] = draw(st.sampled_from([index, f"m{index}", f"{draw(some_text)}#{index}"]))
    if draw(st.booleans()):
        msg["session"] = draw(st.integers() | some_text)
    if draw(st.booleans()):
        msg["extra"] = draw(json_values)
    return msg


message_objects = st.fixed_dictionaries(
    {},
    optional={
        "speaker": _maybe(names),
        "role": _maybe(names),
        "content": _maybe(odd_text.filter(str.strip)),
        "text": _maybe(odd_text),
        "timestamp": _maybe(stamps),
        "id": ids,
        "session": ids,
        "extra": json_values,
    },
)


def _encode(obj: object, ascii_only: bool) -> bytes:
    # ensure_ascii=False writes a lone surrogate raw, which only "surrogatepass" can encode:
    # the CESU-style bytes that UTF-8 forbids (what a buggy exporter writes).
    return json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


raw_lines = st.one_of(
    st.binary(max_size=80),
    st.builds(_encode, json_values, st.booleans()),
    st.sampled_from([b"", b"   ", b"\r", b"\xef\xbb\xbf{}", b"{", b"}", b"[]", b"null", b"NaN", b'"x"', b"1" * 5000]),
)


@st.composite
def with_a_surrogate(draw) -> bytes:
    """A good message with a lone surrogate put into one of its text fields (as the JSON escape, or raw)."""
    msg = draw(good_messages())
    field = draw(st.sampled_from(sorted(k for k, v in msg.items() if isinstance(v, str))))
    at = draw(st.integers(0, len(msg[field])))
    msg[field] = msg[field][:at] + draw(st.sampled_from(SURROGATES) | st.integers(0xD800, 0xDFFF).map(chr)) + msg[field][at:]
    return _encode(msg, draw(st.booleans()))


hostile_lines = st.one_of(st.builds(_encode, message_objects, st.booleans()), raw_lines, with_a_surrogate())


@st.composite
def jsonl_files(draw, hostile=hostile_lines) -> bytes:
    """Well-formed messages; half the time one to three hostile lines among them."""
    n = draw(st.integers(0, 6))
    lines = [_encode(draw(good_messages(i)), draw(st.booleans())) for i in range(n)]
    if draw(st.booleans()):
        for _ in range(draw(st.integers(1, 3))):
            lines.insert(draw(st.integers(0, len(lines))), draw(hostile))
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from([b"", b"  ", b"\t"])))  # blank lines are skipped
    newline = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = newline.join(lines) + draw(st.sampled_from([b"", newline]))
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + data


# -- the rule -----------------------------------------------------------------------


def _event(label: str) -> None:
    """Counted in --hypothesis-show-statistics: how many examples were read, refused, exited 0 or 2."""
    if currently_in_test_context():
        event(label)


def _one_line(message: str) -> None:
    assert message and len(message.splitlines()) == 1 and message == message.strip(), repr(message)
    message.encode("utf-8")  # printable as it is


def refused_or_read(read, data: bytes, *args, **kwargs):
    """The messages, or None after checking the InputError is one line; any other exception fails the test."""
    try:
        messages = read(io.BytesIO(data), *args, **kwargs)
    except InputError as e:
        _one_line(e.message)
        _event("refused")
        return None
    _event("read")
    return messages


_users = (f"user{i}" for i in itertools.count())


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One real SQLite file for the module; each example stores as a user of its own."""
    database = SqliteStore(tmp_path_factory.mktemp("store") / "memory.db")
    yield database
    database.close()


def round_trip(store: SqliteStore, messages, namespace: str = "") -> None:
    """Stored and read back, every message is what was read: text, time (its offset too), ids."""
    user = next(_users)
    keys = message_sql.keys_for(messages, namespace)
    assert len(set(keys)) == len(keys)  # the readers refuse repeated ids; equal lines get occurrence numbers
    with store.transaction():
        assert message_sql.insert_messages(store, user, messages, namespace) == len(messages)
    back = {m.key: m for m in message_sql.all_messages(store, user)}
    assert set(back) == set(keys)
    for key, sent in zip(keys, messages):
        got = back[key]
        assert (got.speaker, got.content, got.source_id, got.session) == (sent.speaker, sent.content, sent.source_id, sent.session)
        assert got.timestamp == sent.timestamp and got.timestamp.isoformat() == sent.timestamp.isoformat()
    assert message_sql.changed_keys(store, user, messages, namespace) == []  # the same input again changes nothing
    with store.transaction():
        forget_sql.forget_user(store, user)  # keeps the file small over a campaign


# -- JSON Lines ---------------------------------------------------------------------


@st.composite
def mutated(draw, files) -> bytes:
    """A file with some bytes flipped, inserted or cut: the damage a disk, a transfer or an editor does."""
    data = bytearray(draw(files))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["flip", "insert", "cut"]))
        if op == "insert" or not data:
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif op == "flip":
            data[min(at, len(data) - 1)] ^= 1 << draw(st.integers(0, 7))
        else:
            del data[at : at + draw(st.integers(1, 8))]
    return bytes(data)


@given(st.one_of(st.binary(max_size=4096), mutated(jsonl_files())))
@example(b"\xff\xfe")
@example(b"\xed\xa0\x80")  # a surrogate encoded as UTF-8 bytes
def test_jsonl_random_and_damaged_bytes_are_read_or_refused(store, data):
    messages = refused_or_read(read_jsonl, data, SRC)
    if messages is not None:
        round_trip(store, messages)


@given(jsonl_files(), st.none() | moments)
@example(b'{"speaker": "Ann", "content": "\\ud800", "timestamp": "2023-05-08T13:56:00"}', None)
@example(b'{"speaker": "\\udfff", "content": "hi", "timestamp": "2023-05-08T13:56:00"}', None)
@example(b'{"speaker": "Ann", "content": "hi", "timestamp": "2023-05-08T13:56:00", "id": ' + b"9" * 5000 + b"}", None)
def test_jsonl_wrong_shapes_and_odd_unicode_are_read_or_refused(store, data, default_timestamp):
    messages = refused_or_read(read_jsonl, data, SRC, default_timestamp=default_timestamp)
    if messages is not None:
        round_trip(store, messages)


@given(
    st.integers(2**12, 2**20),
    st.sampled_from(["content", "speaker", "ignored field", "spaces", "garbage", "digits"]),
)
def test_jsonl_huge_lines_are_read_or_refused(store, size, where):
    stamp = "2023-05-08T13:56:00"
    line = {
        "content": _encode({"speaker": "Ann", "content": "é" * size, "timestamp": stamp}, False),
        "speaker": _encode({"speaker": "🙂" * size, "content": "hi", "timestamp": stamp}, True),
        "ignored field": _encode({"speaker": "Ann", "content": "hi", "timestamp": stamp, "x": "y" * size}, True),
        "spaces": b" " * size,
        "garbage": b"\x00{[" * (size // 3),
        "digits": b"1" * size,
    }[where]
    messages = refused_or_read(read_jsonl, line + b"\n", SRC)
    if messages is not None:
        round_trip(store, messages)


@given(
    st.integers(1, 200_000),
    st.sampled_from([(b"[", b"]"), (b'{"a":', b"}"), (b'{"a":[', b"]}")]),
    st.sampled_from(["top", "content", "ignored field"]),
)
@example(100_000, (b"[", b"]"), "top")
def test_jsonl_deep_nesting_is_read_or_refused(store, depth, brackets, where):
    opening, closing = brackets
    nested = opening * depth + b"1" + closing * depth
    line = {
        "top": nested,
        "content": b'{"speaker": "Ann", "timestamp": "2023-05-08T13:56:00", "content": ' + nested + b"}",
        "ignored field": b'{"speaker": "Ann", "timestamp": "2023-05-08T13:56:00", "content": "hi", "x": ' + nested + b"}",
    }[where]
    messages = refused_or_read(read_jsonl, line, SRC)
    if messages is not None:
        round_trip(store, messages)


@given(st.lists(good_stamps | st.sampled_from(EDGE_STAMPS), min_size=1, max_size=6))
def test_edge_timestamps_naive_and_aware_mixed_keep_their_meaning(store, rows):
    data = b"\n".join(_encode({"speaker": "Ann", "content": f"m{i}", "timestamp": stamp}, True) for i, stamp in enumerate(rows))
    messages = refused_or_read(read_jsonl, data, SRC)
    if messages is None:
        assert not all(isinstance(stamp, str) and _parses(stamp) for stamp in rows)
        return
    for msg, stamp in zip(messages, rows):
        text = stamp.strip()
        text = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text
        assert msg.timestamp == datetime.fromisoformat(text)
        assert (msg.timestamp.tzinfo is None) == (datetime.fromisoformat(text).tzinfo is None)  # naive stays naive
    round_trip(store, messages)


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", 1, "1", "🙂", "a\u200f"]), valid_text), min_size=1, max_size=6))
def test_duplicate_ids_in_one_input_are_refused_naming_both_lines(store, rows):
    lines = [
        {"speaker": "Ann", "content": f"{text} {i}", "timestamp": "2023-05-08T13:56:00", "id": ident}
        for i, (ident, text) in enumerate(rows)
    ]
    data = b"\n".join(_encode(line, True) for line in lines)
    messages = refused_or_read(read_jsonl, data, SRC)
    normalised = [str(ident) for ident, _ in rows]
    if len(set(normalised)) < len(normalised):
        assert messages is None
        with pytest.raises(InputError, match=r"already used on line \d+"):
            read_jsonl(io.BytesIO(data), SRC)
    else:
        assert messages is not None
        round_trip(store, messages)


@given(
    st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), some_text, min_size=1),
    st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), some_text | st.sampled_from(["x", "x "]), min_size=1),
)
def test_an_id_stored_before_with_other_content_keeps_its_text_and_is_found(store, first, second):
    def read(rows: dict) -> list | None:
        data = b"\n".join(
            _encode({"speaker": "Ann", "content": text, "timestamp": "2023-05-08T13:56:00", "id": i}, True) for i, text in rows.items()
        )
        return refused_or_read(read_jsonl, data, SRC)

    before, after = read(first), read(second)
    assert before is not None and after is not None
    user = next(_users)
    with store.transaction():
        message_sql.insert_messages(store, user, before)
    changed = message_sql.changed_keys(store, user, after)
    assert changed == [f"id:{i}" for i in second if i in first and first[i] != second[i]]
    with store.transaction():
        message_sql.insert_messages(store, user, after)
    stored = {m.source_id: m.content for m in message_sql.all_messages(store, user)}
    assert stored == {**second, **first}  # what was stored first stays
    with store.transaction():
        forget_sql.forget_user(store, user)


# -- LoCoMo -------------------------------------------------------------------------

MONTHS = ["January", "Feb", "May", "december", "Smarch", "Mai"]
good_locomo_dates = st.one_of(
    st.builds(
        lambda d, ap, mon: f"{(d.hour % 12) or 12}:{d.minute:02d} {ap} on {d.day} {mon}, {d.year:04d}",
        st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 28)),
        st.sampled_from(["am", "pm", "p.m.", "AM"]),
        st.sampled_from(["May"]),
    ),
    st.sampled_from(["11:59 pm on 31 December, 9999", "12:00 am on 1 January, 0001", "1:56 pm on 8 May, 2023"]),
)
locomo_dates = st.one_of(
    good_locomo_dates,
    st.builds(
        lambda h, m, ap, d, mon, y: f"{h}:{m:02d} {ap} on {d} {mon}, {y}",
        st.integers(0, 13),
        st.integers(0, 60),
        st.sampled_from(["am", "pm", "p.m.", "AM"]),
        st.integers(0, 32),
        st.sampled_from(MONTHS),
        st.sampled_from([1, 2023, 9999, 0, 10000]),
    ),
    st.sampled_from(["1:56 pm on 31 February, 2023", "1:56 pm on 8 May 2023", "13:56 on 8 May, 2023"]),
    odd_text,
    json_leaves,
)
session_keys = st.sampled_from(["session_01", "session_0", "session_١", "session_" + "9" * 30, "session_x", "session_1_date_time"])
hostile_turns = st.fixed_dictionaries(
    {"speaker": _maybe(names), "dia_id": _maybe(st.sampled_from(["D1:1", "D1:2", "D2:1"]) | odd_text), "text": _maybe(odd_text)},
    optional={"blip_caption": _maybe(odd_text), "img_url": json_values},
)


@st.composite
def good_turns(draw, session: int, index: int) -> dict:
    turn = {"speaker": draw(valid_names), "dia_id": f"D{session}:{index + 1}", "text": draw(some_text)}
    if draw(st.integers(0, 3)) == 0:
        turn["blip_caption"] = draw(valid_text)
    return turn


@st.composite
def locomo_samples(draw, sample_id: str) -> dict:
    """A LoCoMo sample; half the time something hostile replaces a date, a turn, a session or its key."""
    conv = {"speaker_a": "Ann", "speaker_b": "Bob"}
    for n in range(1, draw(st.integers(1, 3)) + 1):
        many = draw(st.integers(0, 9)) == 0  # past 60 turns, a session dated 11:59 pm on 31 December 9999 runs out of time
        conv[f"session_{n}"] = [draw(good_turns(n, i)) for i in range(draw(st.integers(61, 80) if many else st.integers(0, 4)))]
        conv[f"session_{n}_date_time"] = draw(good_locomo_dates)
    if draw(st.booleans()):
        where = draw(st.sampled_from(["date", "turn", "session", "key", "conversation", "sample_id"]))
        n = draw(st.integers(1, 3))
        if where == "date":
            conv[f"session_{n}_date_time"] = draw(locomo_dates)
        elif where == "turn" and conv.get(f"session_{n}"):
            turns = conv[f"session_{n}"]
            turns[draw(st.integers(0, len(turns) - 1))] = draw(_maybe(hostile_turns))
        elif where == "session":
            conv[f"session_{n}"] = draw(json_values)
        elif where == "key":
            key = draw(session_keys)
            conv[key] = [draw(_maybe(hostile_turns)) for _ in range(draw(st.integers(0, 2)))]
            if draw(st.booleans()):
                conv[f"{key}_date_time"] = draw(locomo_dates)
        elif where == "conversation":
            return {"sample_id": sample_id, "conversation": draw(json_values)}
        else:
            sample_id = draw(_maybe(odd_text))
    sample = {"sample_id": sample_id, "conversation": conv}
    if draw(st.integers(0, 3)) == 0:
        sample["qa"] = draw(json_values)
    return sample


@st.composite
def locomo_data(draw) -> tuple[bytes, str | None]:
    """A LoCoMo file and the sample id asked for (mostly one in the file)."""
    kind = draw(st.integers(0, 9))
    if kind < 7:
        chosen = draw(st.sampled_from(["conv-1", "conv-26", "🙂", "a\nb"]) | some_text)
        samples = [draw(locomo_samples(chosen))]
        for other in draw(st.lists(st.sampled_from(["conv-2", "conv-3", chosen]), max_size=2)):
            samples.insert(draw(st.integers(0, len(samples))), draw(locomo_samples(other)))
        data = _encode(samples, draw(st.booleans()))
        asked = draw(st.one_of(st.just(chosen), st.just(chosen), st.just(chosen), st.none(), odd_text))
        return data, asked
    if kind == 7:
        return _encode(draw(json_values), draw(st.booleans())), draw(st.none() | odd_text)
    if kind == 8:
        return draw(st.binary(max_size=200)), None
    depth = draw(st.integers(1, 100_000))
    return b"[" * depth + b"]" * depth, None


locomo_files = locomo_data().map(lambda pair: pair[0])


@given(st.one_of(locomo_data(), st.tuples(mutated(locomo_files), st.none() | st.just("conv-1"))))
@example(
    (
        b'[{"sample_id": "s", "conversation": {"session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "\\ud800"}], "session_1_date_time": "1:56 pm on 8 May, 2023"}}]',
        None,
    )
)
@example(
    (
        b'[{"sample_id": "s", "conversation": {"session_01": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}], "session_01_date_time": "1:56 pm on 8 May, 2023"}}]',
        None,
    )
)
@example((b'[{"sample_id": "a\\nb", "conversation": {}}, {"sample_id": "c", "conversation": {}}]', None))
def test_locomo_files_are_read_or_refused(store, file):
    data, sample_id = file
    messages = refused_or_read(read_locomo, data, "hostile.json", sample_id=sample_id)
    if messages is not None:
        round_trip(store, messages, f"locomo:{sample_id or ''}:")


# -- chat exports ---------------------------------------------------------------------
# Each export reader on its fixture damaged (bytes flipped, cut, inserted), on
# the fixture with one value anywhere in it replaced by a hostile one (the
# wrong shapes a near-miss exporter writes), and on random bytes; and --format
# auto on all of them. The same rule: read, and then stored and read back
# unchanged, or refused in one line.

EXPORTS = Path(__file__).resolve().parent.parent / "fixtures" / "exports"
EXPORT_FIXTURES = {
    "chatgpt": "chatgpt_conversations.json",
    "claude": "claude_conversations.json",
    "telegram": "telegram_result.json",
    "openai": "openai_messages.json",
    "longmemeval": "longmemeval_records.json",
    "whatsapp": "whatsapp_ios.txt",
}


def _export_reader(fmt: str):
    from nemori_cli.importers import formats
    from nemori_cli.importers.selection import Selection

    # One LongMemEval record is chosen (a file of several is refused unchosen); OpenAI lines may lack times.
    selection = Selection(("q-cat-2",)) if fmt == "longmemeval" else Selection()
    return lambda stream, source: formats.read(fmt, stream, source, selection=selection, default_timestamp=datetime(2024, 1, 1))


def _paths(value, path=()):
    """Every place in a JSON value, as the keys and indexes that lead to it."""
    yield path
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*path, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _paths(inner, (*path, i))


@st.composite
def reshaped(draw, fixture: str) -> bytes:
    """The fixture with one value (anywhere, the whole file included) replaced by a hostile JSON value."""
    value = json.loads((EXPORTS / fixture).read_text(encoding="utf-8"))
    places = list(_paths(value))
    path = draw(st.sampled_from(places))
    replacement = draw(json_values)
    if not path:
        return _encode(replacement, draw(st.booleans()))
    holder = value
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = replacement
    return _encode(value, draw(st.booleans()))


def _fixture_bytes(fmt: str) -> bytes:
    return (EXPORTS / EXPORT_FIXTURES[fmt]).read_bytes()


def _zipped(data: bytes) -> bytes:
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("WhatsApp Chat with Ann.txt", data)
    return buffer.getvalue()


@st.composite
def export_inputs(draw) -> tuple[str, bytes]:
    fmt = draw(st.sampled_from(sorted(EXPORT_FIXTURES)))
    original = _fixture_bytes(fmt)
    how = draw(st.sampled_from(["damaged", "reshaped", "random", "zip"]))
    if how == "damaged":
        return fmt, draw(mutated(st.just(original)))
    if how == "reshaped" and fmt != "whatsapp":
        return fmt, draw(reshaped(EXPORT_FIXTURES[fmt]))
    if how == "zip":
        return "whatsapp", draw(mutated(st.just(_zipped(_fixture_bytes("whatsapp"))))) if draw(st.booleans()) else _zipped(
            draw(mutated(st.just(_fixture_bytes("whatsapp"))) | st.binary(max_size=300))
        )
    return fmt, draw(st.binary(max_size=2048) | st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")))


@given(export_inputs())
@example(("chatgpt", b'[{"id": "c", "mapping": {"n": {"parent": "n", "message": null}}, "current_node": "n"}]'))
@example(("telegram", b'{"messages": [{"id": 1, "type": "message", "date_unixtime": "99999999999999999999", "text": "x"}]}'))
@example(("openai", b'[{"role": "user", "content": "x", "created": 1e300}]'))
@example(("whatsapp", "[1/5/24, 9:41:05\u202fPM] Ann: \ud800".encode("utf-8", "surrogatepass")))
@example(("chatgpt", b"[" * 100_000 + b"]" * 100_000))  # ijson's own prefixes would cost gigabytes here
@example(("telegram", b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"))
@example(("openai", b'{"a":[' * 100_000))
def test_exports_damaged_reshaped_and_random_are_read_or_refused(store, given_input):
    fmt, data = given_input
    imported = refused_or_read(_export_reader(fmt), data, f"hostile.{fmt}")
    if imported is not None:
        round_trip(store, imported.messages, imported.namespace)
    detected = refused_or_read(lambda stream, source: formats_read_auto(stream, source), data, "hostile.input")
    if detected is not None:
        round_trip(store, detected.messages, detected.namespace)


def formats_read_auto(stream, source):
    from nemori_cli.importers import formats

    return formats.read("auto", stream, source, default_timestamp=datetime(2024, 1, 1))


# -- the CLI ------------------------------------------------------------------------

FAKE_PRESET = '[embedder.fake]\nkind = "sentence-transformers"\nname = "fake-bow"\ndimensions = 64\n'


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory):
    """A database made by a real ingest (fake LLM and embedder) and the environment every run gets."""
    from _pytest.monkeypatch import MonkeyPatch

    from tests.unit.fake_ingest import nemori

    root = tmp_path_factory.mktemp("cli")
    presets = root / "models.toml"
    presets.write_text(FAKE_PRESET, encoding="utf-8")
    env = {name: None for name in os.environ if name.startswith("NEMORI_")}
    env.update(
        NEMORI_MODELS_FILE=str(presets),
        NEMORI_EMBEDDER="fake",
        NEMORI_CACHE_DIR=str(root / "cache"),
        XDG_CONFIG_HOME=str(root / "config"),
    )
    with MonkeyPatch.context() as mp:
        for name, value in env.items():
            if value is None:
                mp.delenv(name, raising=False)
            else:
                mp.setenv(name, value)
        use_fakes(mp)
        db = root / "db" / "memory.db"
        db.parent.mkdir()
        seed = write_jsonl(root / "seed.jsonl", conversation(("kayak", "piano")))
        made = nemori("ingest", seed, "--db", db)
        assert made.exit_code == 0, made.output
        yield {"db": db, "env": env, "root": root}


def _fingerprint(db: Path) -> tuple:
    return hashlib.sha256(db.read_bytes()).hexdigest(), sorted(p.name for p in db.parent.iterdir())


def assert_clean_exit(cli_env, args: list[str], stdin: bytes | None = None) -> tuple[int, str, str]:
    """Exit 0, or 2 with one line on stderr and nothing on stdout; the database byte-identical either way."""
    before = _fingerprint(cli_env["db"])
    code, out, err = run_nemori(args, cli_env["env"], stdin)
    assert "Traceback" not in err
    assert code in (0, 2), (code, out, err)
    _event(f"exit {code}")
    if code == 2:
        assert out == "" and err.startswith("nemori: error: ") and err.count("\n") == 1 and err.endswith("\n"), err
        _one_line(err.rstrip("\n"))
    else:
        assert all(line.startswith("nemori: ") for line in err.splitlines()), err  # notes only
    assert _fingerprint(cli_env["db"]) == before
    return code, out, err


cli_options = st.fixed_dictionaries(
    {},
    optional={
        "--format": st.sampled_from(["jsonl", "locomo", "csv", ""]),
        "--sample": st.sampled_from(["conv-1", "conv-2"]) | odd_text,
        "--sessions": st.sampled_from(["1", "1-2", "2-1", "0", "-", "1-", " 1", "x", "9" * 5000]) | odd_text,
        "--default-timestamp": st.sampled_from(EDGE_STAMPS) | odd_text,
        "--window": st.sampled_from(["1", "2", "20", "201", "x"]),
        "--max-tokens": st.sampled_from(["0", "-5", "1", "x", "9" * 30]),
    },
)
seeded_ids = st.sampled_from([f"{t}-{i}" for t in ("kayak", "piano") for i in range(4)])


@st.composite
def ingest_inputs(draw) -> tuple[bytes, dict]:
    """An input and the options given with it: mostly ones that fit (a LoCoMo file with --format locomo), sometimes any."""
    kind = draw(st.sampled_from(["jsonl", "edits", "locomo"]))
    if kind == "locomo":
        data, sample = draw(locomo_data())
        options = {"--format": "locomo"}
        if sample is not None:
            options["--sample"] = sample
        if draw(st.booleans()):
            options["--sessions"] = draw(st.sampled_from(["1", "1-2", "2-3", "1-3"]))
    else:
        data, options = draw(jsonl_files()), {}
        if kind == "edits":  # messages the database holds, under their ids, saying something else (or the same)
            edits = [
                _encode({"id": i, "speaker": "Ann", "content": draw(some_text), "timestamp": "2023-05-08T10:00:00"}, True)
                for i in draw(st.lists(seeded_ids, min_size=1, max_size=3, unique=True))
            ]
            data = data.rstrip(b"\r\n") + b"\n" + b"\n".join(edits) + b"\n"
    if draw(st.integers(0, 2)) == 0:
        options.update(draw(cli_options))
    return data, options


@given(ingest_inputs(), st.booleans())
def test_cli_ingest_dry_run_exits_0_or_2_leaving_the_database_as_it_was(cli_env, given_input, from_stdin):
    data, options = given_input
    path = cli_env["root"] / "input.jsonl"
    path.write_bytes(data)
    args = ["ingest", "-" if from_stdin else str(path), "--dry-run", "--json", "--db", str(cli_env["db"])]
    for name, value in options.items():
        args.append(f"{name}={value}")
    code, out, err = assert_clean_exit(cli_env, args, stdin=data if from_stdin else None)
    if code == 0:
        plan = json.loads(out)
        assert plan["dry_run"] and plan["read"] >= 1 and 0 <= plan["changed"] <= plan["already_stored"]
        assert ("different content" in err) == (plan["changed"] > 0)
        _event("edited messages found" if plan["changed"] else "no edits")


@given(
    export_inputs(),
    st.booleans(),
    st.sampled_from(["", "--format={fmt}", "--conversation=Cat food", "--since=2024-01-01", "--until=2023-12-31"]),
)
def test_cli_ingest_dry_run_of_exports_exits_0_or_2(cli_env, given_input, from_stdin, option):
    fmt, data = given_input
    path = cli_env["root"] / "export.input"
    path.write_bytes(data)
    args = [
        "ingest",
        "-" if from_stdin else str(path),
        "--dry-run",
        "--json",
        "--db",
        str(cli_env["db"]),
        "--default-timestamp=2024-01-01T00:00:00",
    ]
    args += [option.format(fmt=fmt)] if option else []
    code, out, _ = assert_clean_exit(cli_env, args, stdin=data if from_stdin else None)
    if code == 0:
        plan = json.loads(out)
        assert plan["read"] >= 1 and plan["conversations"] >= 1 and plan["format"] in EXPORT_FIXTURES.keys() | {"jsonl", "locomo"}


@given(names | st.sampled_from(["", " ", "default", "-", "--json", "a=b", "alice\nbob", "\ud800", "\udcff"]), st.booleans())
def test_cli_user_values_exit_0_or_2(cli_env, user, by_env):
    seed = cli_env["root"] / "seed.jsonl"
    tail = [] if by_env else [f"--user={user}"]
    env = {**cli_env["env"], "NEMORI_USER": user} if by_env else cli_env["env"]
    if by_env:
        try:
            user.encode("utf-8")
        except UnicodeEncodeError:
            return  # an environment variable cannot hold a lone surrogate...
        if "\x00" in user:
            return  # ...nor a NUL
    for args in (
        ["ingest", str(seed), "--dry-run", "--json", "--db", str(cli_env["db"])],
        ["search", "kayak", "--json", "--db", str(cli_env["db"])],
    ):
        before = _fingerprint(cli_env["db"])
        code, out, err = run_nemori(args + tail, env)
        assert "Traceback" not in err and code in (0, 2), (code, out, err)
        _event(f"{args[0]}: exit {code}")
        if code == 0:
            assert json.loads(out)["user"] == user
        else:
            assert out == "" and err.count("\n") == 1 and err.startswith("nemori: error: "), err
            _one_line(err.rstrip("\n"))
        assert _fingerprint(cli_env["db"]) == before
        if not user.strip():
            assert code == 2  # an empty user is never read as 'default'


FTS_SYNTAX = [
    '"',
    '""',
    "'",
    "NEAR(",
    "NEAR(kayak piano, 2)",
    "NEAR",
    ")",
    "(",
    "((",
    "*",
    "kay*",
    "^",
    "^kayak",
    "title:",
    "narrative:",
    "{title narrative}:",
    "-title:",
    "user_id:",
    "AND",
    "OR",
    "NOT",
    "-",
    "+",
    ":",
    ",",
    "kayak",
    "piano",
    "Ann",
    "the",
    "\x00",
    "\ud800",
]
queries = st.one_of(
    st.lists(st.sampled_from(FTS_SYNTAX) | odd_text, min_size=1, max_size=8).map(" ".join),
    st.lists(st.sampled_from(FTS_SYNTAX), min_size=1, max_size=8).map("".join),
    odd_text,
    st.integers(1, 20_000).map(lambda n: "kayak " * n),
)


@given(queries, st.sampled_from(["hybrid", "vector", "text"]))
@example('"kayak', "text")
@example("NEAR(kayak piano", "hybrid")
@example("title:kayak OR {narrative}:piano*", "text")
def test_cli_search_queries_exit_0_or_2(cli_env, query, mode):
    args = ["search", "--json", "--mode", mode, "--db", str(cli_env["db"]), "--", query]
    code, out, _ = assert_clean_exit(cli_env, args)
    if code == 0:
        assert json.loads(out)["query"] == query.strip()


# -- the faults the campaign found, one each ------------------------------------------


def test_a_lone_surrogate_is_refused_naming_line_and_field_even_in_a_dry_run(cli_env):
    path = cli_env["root"] / "surrogate.jsonl"
    path.write_bytes(
        b'{"speaker": "Ann", "content": "hi", "timestamp": "2023-05-08T13:56:00"}\n{"speaker": "Ann", "text": "x\\ud800", "timestamp": "2023-05-08T13:56:00"}\n'
    )
    _, _, err = assert_clean_exit(cli_env, ["ingest", str(path), "--dry-run", "--db", str(cli_env["db"])])
    assert f"{path}:2: 'text' holds a lone surrogate" in err


def test_a_directory_is_said_to_be_one(cli_env):
    _, _, err = assert_clean_exit(cli_env, ["ingest", str(cli_env["root"]), "--dry-run", "--db", str(cli_env["db"])])
    assert "is a directory" in err and "no such file" not in err


@pytest.mark.parametrize("value", ["abc", "0", "-1"])
def test_a_bad_thread_count_exits_2_naming_the_variable(cli_env, value):
    seed = str(cli_env["root"] / "seed.jsonl")
    code, _, err = run_nemori(["ingest", seed, "--dry-run", "--db", str(cli_env["db"])], {**cli_env["env"], "NEMORI_THREADS": value})
    assert code == 2 and "NEMORI_THREADS" in err and err.count("\n") == 1


def test_an_edited_message_keeps_its_stored_text_and_is_reported(monkeypatch, tmp_path):
    from tests.unit.fake_ingest import isolate, nemori

    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    presets = tmp_path / "models.toml"  # the dry run checks the database's embedder against a preset
    presets.write_text(FAKE_PRESET, encoding="utf-8")
    monkeypatch.setenv("NEMORI_MODELS_FILE", str(presets))
    monkeypatch.setenv("NEMORI_EMBEDDER", "fake")
    db = tmp_path / "memory.db"
    rows = conversation(("kayak",))
    assert nemori("ingest", write_jsonl(tmp_path / "a.jsonl", rows), "--db", db).exit_code == 0
    edited = [dict(r, content=r["content"] + " (edited)") if r["id"] in ("kayak-1", "kayak-3") else r for r in rows]
    path = write_jsonl(tmp_path / "b.jsonl", edited)

    dry = nemori("ingest", path, "--db", db, "--dry-run", "--json")
    assert dry.exit_code == 0, (dry.output, dry.exception)
    assert json.loads(dry.stdout)["changed"] == 2
    assert "2 messages already stored under the same id with different content would keep" in dry.stderr

    again = nemori("ingest", path, "--db", db, "--json")
    assert again.exit_code == 0, again.output
    report = json.loads(again.stdout)
    assert (report["read"], report["added"], report["changed"]) == (4, 0, 2)
    (note,) = again.stderr.splitlines()
    assert note.startswith("nemori: 2 messages already stored") and "'kayak-1', 'kayak-3'" in note

    text = nemori("ingest", path, "--db", db)
    assert "(0 new, 2 changed but kept as stored)" in text.stdout
    stored = SqliteStore(db)
    try:
        contents = {m.source_id: m.content for m in message_sql.all_messages(stored, "default")}
    finally:
        stored.close()
    assert contents == {r["id"]: r["content"] for r in rows}  # the stored text stays


@given(jsonl_files())
def test_cli_real_ingest_with_the_fake_model_exits_0_or_2_and_stores_what_it_read(cli_env, data):
    """What a dry run accepts, a real ingest (fake LLM and embedder) stores and makes episodes of, for a user of its own."""
    path = cli_env["root"] / "real.jsonl"
    path.write_bytes(data)
    user = next(_users)
    db = cli_env["root"] / "real" / "memory.db"
    db.parent.mkdir(exist_ok=True)
    code, out, err = run_nemori(["ingest", str(path), "--json", "--db", str(db), f"--user={user}"], cli_env["env"])
    assert "Traceback" not in err and code in (0, 2), (code, out, err)
    _event(f"exit {code}")
    if code == 2:
        assert out == "" and err.count("\n") == 1, err
        return
    report = json.loads(out)
    assert report["pending"] == 0 and report["added"] == report["read"]
    stored = SqliteStore(db)
    try:
        assert len(message_sql.all_messages(stored, user)) == report["read"]
    finally:
        stored.close()
