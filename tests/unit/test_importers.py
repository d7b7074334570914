"""Chat exports (ChatGPT, Claude, WhatsApp, Telegram, OpenAI-style, LongMemEval) become IncomingMessages.

Each reader on its fixture (tests/fixtures/exports/): what is kept, what is
left out and why, times, sessions, and ids that stay the same across reads.
Then the selection, format detection, near-miss files (one line naming the
format and the position), streaming, and `nemori ingest` on each export.
"""

from __future__ import annotations

import copy
import importlib.util
import io
import json
import tracemalloc
import zipfile
from datetime import UTC, datetime, timedelta

import pytest

from nemori_cli.errors import InputError
from nemori_cli.importers import chatgpt, claude, detect, formats, longmemeval, openai_messages, telegram, whatsapp
from nemori_cli.importers.peek import PeekedStream, peek
from nemori_cli.importers.selection import Selection, parse_bound
from tests.conftest import REPO
from tests.unit.fake_ingest import isolate, nemori, use_fakes

EXPORTS = REPO / "tests" / "fixtures" / "exports"
UTC = UTC


def load(module, name: str, **kwargs):
    with (EXPORTS / name).open("rb") as f:
        return module.read(f, name, **kwargs)


def refused(read, data: bytes, *args, **kwargs) -> str:
    """The one-line InputError ``read`` raises on ``data``."""
    with pytest.raises(InputError) as info:
        read(io.BytesIO(data), "export.json", *args, **kwargs)
    message = info.value.message
    assert "\n" not in message and message == message.strip(), repr(message)
    return message


def fixture_json(name: str):
    return json.loads((EXPORTS / name).read_text(encoding="utf-8"))


def as_bytes(value) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


# -- ChatGPT ---------------------------------------------------------------------------


def test_chatgpt_reads_the_branch_the_user_ended_on_and_counts_what_it_left_out():
    got = load(chatgpt, "chatgpt_conversations.json")
    assert (len(got.messages), got.conversations, got.namespace) == (12, 3, "chatgpt:")
    assert got.left_out == {"system": 1, "hidden": 1, "tool": 4, "empty": 1}
    assert got.left_out_line() == "left out 7 messages: 4 tool, 1 empty, 1 hidden, 1 system"
    first, last = got.messages[0], got.messages[-1]
    assert (first.speaker, first.session, first.source_id) == ("user", "6553a1f0-lisbon", "6553a1f0-lisbon:aaaa-u1")
    assert first.content.startswith("I'm moving from Porto to Lisbon in March.")
    assert first.timestamp == datetime(2023, 11, 14, 22, 13, 30, tzinfo=UTC)
    assert (last.speaker, last.content) == ("assistant", "It returns None, so test the result with `if m is None`.")
    texts = [m.content for m in got.messages]
    assert not any("regenerated away" in t for t in texts)  # the branch the user left
    assert any(t.startswith("For a move from Porto") for t in texts)  # the regenerated answer they kept
    assert not any("Be brief" in t or "blue and yellow lines stop" in t or "search(" in t for t in texts)  # hidden, tool, tool call
    assert [m.speaker for m in got.messages[:6]] == ["user", "assistant", "user", "assistant", "user", "assistant"]


def test_chatgpt_a_missing_create_time_takes_the_one_before_and_notes_stand_for_images():
    by_id = {m.source_id: m for m in load(chatgpt, "chatgpt_conversations.json").messages}
    assert by_id["6553a1f0-lisbon:aaaa-u2"].timestamp == by_id["6553a1f0-lisbon:aaaa-a1b"].timestamp
    assert by_id["6553a1f0-lisbon:aaaa-u3"].content == "[image]\nThis is the flat in Arroios I'm viewing on Saturday."
    assert all(m.timestamp.tzinfo is UTC for m in by_id.values())


def test_chatgpt_ids_are_the_same_on_every_read():
    once, twice = load(chatgpt, "chatgpt_conversations.json"), load(chatgpt, "chatgpt_conversations.json")
    assert [m.source_id for m in once.messages] == [m.source_id for m in twice.messages]
    assert len({m.source_id for m in once.messages}) == len(once.messages)


def test_chatgpt_without_times_on_nodes_uses_the_conversations_and_without_current_node_the_last_leaf():
    data = fixture_json("chatgpt_conversations.json")[1:2]
    for node in data[0]["mapping"].values():
        if node["message"]:
            node["message"]["create_time"] = None
    del data[0]["current_node"]
    got = chatgpt.read(io.BytesIO(as_bytes(data)), "c.json")
    assert [m.timestamp for m in got.messages] == [datetime.fromtimestamp(data[0]["create_time"], UTC)] * 4
    assert got.messages[-1].content == "Gerald is a fine name for a starter."


def test_chatgpt_long_messages_are_kept_whole():
    data = fixture_json("chatgpt_conversations.json")[1:2]
    long = "word " * 20_000
    data[0]["mapping"]["bbbb-a3"]["message"]["content"]["parts"] = [long]
    got = chatgpt.read(io.BytesIO(as_bytes(data)), "c.json")
    assert got.messages[-1].content == long


@pytest.mark.parametrize(
    ("change", "needles"),
    [
        (lambda d: d[1].pop("mapping"), ["conversation 1 ('6553a1f0-sourdough')", "no 'mapping'"]),
        (
            lambda d: d[0]["mapping"]["aaaa-u2"].update(parent="gone"),
            ["conversation 0", "node 'aaaa-u2'", "parent 'gone' is not in 'mapping'"],
        ),
        (lambda d: d[0]["mapping"]["aaaa-root"].update(parent="aaaa-a4"), ["conversation 0", "lead back"]),
        (lambda d: d[2].update(current_node="nowhere"), ["conversation 2", "'current_node' 'nowhere'"]),
        (lambda d: d[0]["mapping"]["aaaa-u1"]["message"].update(create_time="noon"), ["node 'aaaa-u1'", "'create_time' is 'noon'"]),
        (lambda d: d[1].pop("id") and d[1].pop("conversation_id"), ["conversation 1:", "no 'id'"]),
        (lambda d: d.append(7), ["conversation 3:", "a JSON number, not an object"]),
        (lambda d: d.append(copy.deepcopy(d[0])), ["appears a second time"]),
    ],
)
def test_chatgpt_near_misses_name_the_conversation_and_what_was_expected(change, needles):
    data = fixture_json("chatgpt_conversations.json")
    change(data)
    message = refused(chatgpt.read, as_bytes(data))
    assert message.startswith("export.json: ")
    for needle in needles:
        assert needle in message, message


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"", "empty input"),
        (b"{}", "the top level is an object, not a list"),
        (b"[]", "no conversations"),
        (b'[{"id": "a", "mapping": {}}', "not valid JSON at conversation 0"),
        (b'[{"id": "a", "mapping": {}}] and more', "not valid JSON"),
        (b'\xef\xbb\xbf[{"id": 1}]', "conversation 0: no 'id'"),  # a BOM is not content
    ],
)
def test_chatgpt_broken_files_are_one_line(data, needle):
    message = refused(chatgpt.read, data)
    assert needle in message and "ChatGPT" in message, message


# -- Claude ------------------------------------------------------------------------------


def test_claude_reads_text_blocks_and_notes_files_leaving_out_tool_only_and_empty_messages():
    got = load(claude, "claude_conversations.json")
    assert (len(got.messages), got.conversations, got.left_out) == (6, 2, {"tool": 1, "empty": 1})
    assert [m.speaker for m in got.messages] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    first, attached, blocks, filed = got.messages[0], got.messages[2], got.messages[3], got.messages[4]
    assert first.timestamp == datetime(2024, 3, 10, 9, 0, 5, 120000, tzinfo=UTC)
    assert (first.session, first.source_id) == ("0b6c2f4e-trip", "0b6c2f4e-trip:m-trip-1")
    assert attached.content == "[attachment: itinerary.pdf]"
    assert blocks.content == "Your itinerary leaves Furnas for day 6;\n\nI'd move it earlier in case of rain."
    assert filed.content == "My cat Miso is 12 and has started refusing dry food.\n\n[file: miso.jpg]"
    again = load(claude, "claude_conversations.json")
    assert [m.source_id for m in again.messages] == [m.source_id for m in got.messages]


@pytest.mark.parametrize(
    ("change", "needles"),
    [
        (lambda d: d[1].pop("chat_messages"), ["conversation 1 ('0b6c2f4e-cat')", "no 'chat_messages'"]),
        (lambda d: d[0]["chat_messages"][1].update(created_at="yesterday"), ["message 1 ('m-trip-2')", "'created_at' is 'yesterday'"]),
        (lambda d: d[0]["chat_messages"][2].pop("uuid"), ["conversation 0 ('0b6c2f4e-trip') message 2", "no 'uuid'"]),
        (lambda d: d[0]["chat_messages"][0].update(content=["text"]), ["content block 0 is a JSON string"]),
    ],
)
def test_claude_near_misses_name_the_position(change, needles):
    data = fixture_json("claude_conversations.json")
    change(data)
    message = refused(claude.read, as_bytes(data))
    for needle in needles:
        assert needle in message, message


# -- WhatsApp ----------------------------------------------------------------------------


def test_whatsapp_ios_month_first_with_marks_media_and_multiline_messages():
    got = load(whatsapp, "whatsapp_ios.txt")
    assert (len(got.messages), got.conversations, got.left_out) == (9, 1, {"system": 3, "deleted": 1})
    first, multi = got.messages[0], got.messages[1]
    assert (first.speaker, first.content, first.session) == ("Ann", "Welcome! First book: The Left Hand of Darkness.", "whatsapp_ios")
    assert first.timestamp == datetime(2024, 1, 5, 21, 43)  # 1/5/24: 5 January (1/13/24 decides month first)
    assert multi.content == "Great choice.\nI've wanted to read it for years.\n\nChapter 1 by Friday?"
    assert [m.content for m in got.messages[2:4]] == ["[image]", "[image]"]
    assert got.messages[5].speaker == "+44 7700 900123"  # the bidi marks around a number are not its name
    assert got.messages[6].content == "Meeting at my place on the 20th, 7pm."  # "<This message was edited>" is a marker
    twins = got.messages[7:9]
    assert twins[0].content == twins[1].content and twins[0].source_id != twins[1].source_id
    assert got.messages[-1].timestamp == datetime(2024, 1, 20, 19, 5)


def test_whatsapp_android_day_first_crlf_and_system_lines():
    got = load(whatsapp, "whatsapp_android.txt")
    assert (len(got.messages), got.left_out) == (5, {"system": 4, "deleted": 1})
    assert got.messages[0].timestamp == datetime(2023, 12, 31, 21, 43)
    assert got.messages[2].timestamp == datetime(2024, 1, 1, 10, 15)  # 01/01/2024, not read as 1 January by luck: day first
    assert [m.content for m in got.messages] == [
        "Feliz ano novo! 🎆",
        "[media]",
        "Happy new year! We're moving to Berlin in March, by the way.",
        "What?! Since when?\nTell me everything.",
        "[image]\nThe new flat",
    ]
    assert [m.speaker for m in got.messages] == ["Carla", "Diego", "Diego", "Carla", "Diego"]


def whatsapp_zip(txt: bytes, member: str = "WhatsApp Chat with Família.txt") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(member, txt)
        z.writestr("IMG-20240102-WA0003.jpg", b"\xff\xd8\xff\xe0 not really a jpeg")
    return buffer.getvalue()


def test_whatsapp_zip_reads_the_chat_inside_with_the_same_ids_and_its_name_as_the_session(tmp_path):
    txt = (EXPORTS / "whatsapp_android.txt").read_bytes()
    path = tmp_path / "whatsapp_android.zip"
    path.write_bytes(whatsapp_zip(txt))
    with path.open("rb") as f:
        zipped = whatsapp.read(f, str(path))
    plain = whatsapp.read(io.BytesIO(txt), "WhatsApp Chat with Família.txt")
    assert [(m.source_id, m.content, m.session) for m in zipped.messages] == [(m.source_id, m.content, m.session) for m in plain.messages]
    assert zipped.messages[0].session == "Família"
    piped = whatsapp.read(io.BufferedReader(PeekedStream(b"", io.BytesIO(path.read_bytes()))), "<stdin>")  # not seekable: held
    assert [m.source_id for m in piped.messages] == [m.source_id for m in zipped.messages]


def test_whatsapp_zip_without_one_chat_is_refused():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("conversations.json", b"[]")
    assert "holds 0 chat text files" in refused(whatsapp.read, buffer.getvalue())
    assert "not a readable zip" in refused(whatsapp.read, b"PK\x03\x04" + b"\x00" * 40)


NNBSP, LRM = "\u202f", "\u200e"


@pytest.mark.parametrize(
    ("line", "when", "speaker"),
    [
        ("31.12.23, 21:41 - Lena: Guten Rutsch!", datetime(2023, 12, 31, 21, 41), "Lena"),
        ("2023-12-31 21:41 - Lena: hi", datetime(2023, 12, 31, 21, 41), "Lena"),
        (f"12/31/23, 9:41{NNBSP}PM - Joe: hi", datetime(2023, 12, 31, 21, 41), "Joe"),
        (f"{LRM}[31/12/2023, 21:41:07] Joe: hi", datetime(2023, 12, 31, 21, 41, 7), "Joe"),
        ("[12/31/23, 12:05 AM] Joe: hi", datetime(2023, 12, 31, 0, 5), "Joe"),
        ("31/12/2023 21:41 - Joe: time: 9pm", datetime(2023, 12, 31, 21, 41), "Joe"),
    ],
)
def test_whatsapp_locale_layouts(line, when, speaker):
    (m,) = whatsapp.read(io.BytesIO(line.encode()), "chat.txt").messages
    assert (m.timestamp, m.speaker) == (when, speaker)


@pytest.mark.parametrize(
    ("lines", "day"),
    [
        (["05/01/2024, 10:00 - A: x", "06/01/2024, 10:00 - A: y"], (2024, 1, 5)),  # 24-hour: day first
        (["[05/01/24, 10:00:00 AM] A: x"], (2024, 5, 1)),  # 12-hour: month first (en_US)
        (["05.01.24, 10:00 - A: x"], (2024, 1, 5)),  # dotted: always day first
    ],
)
def test_whatsapp_ambiguous_dates_follow_the_documented_default(lines, day):
    got = whatsapp.read(io.BytesIO("\n".join(lines).encode()), "chat.txt")
    assert got.messages[0].timestamp.date() == datetime(*day).date()


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("hello\n31/12/2023, 21:41 - A: x", ["chat.txt:1:", "not a WhatsApp message line"]),
        ("13/12/2023, 21:41 - A: x\n12/13/2023, 21:41 - A: y", ["day first on line 1", "month first on line 2"]),
        ("31/02/2023, 21:41 - A: x", ["chat.txt:1:", "not a date"]),
        ("[12/31/23, 13:41 PM] A: x", ["chat.txt:1:", "AM/PM"]),
        ("31/12/2023, 21:41 - Messages and calls are end-to-end encrypted.", ["no messages to read", "1 system"]),
    ],
)
def test_whatsapp_bad_lines_are_one_line_naming_the_line(text, needles):
    with pytest.raises(InputError) as info:
        whatsapp.read(io.BytesIO(text.encode()), "chat.txt")
    for needle in needles:
        assert needle in info.value.message, info.value.message


def test_whatsapp_ids_are_stable_and_survive_a_later_export_of_the_same_chat():
    text = (EXPORTS / "whatsapp_ios.txt").read_bytes()
    first = whatsapp.read(io.BytesIO(text), "whatsapp_ios.txt")
    later = whatsapp.read(io.BytesIO(text + "[1/21/24, 8:00:00\u202fAM] Ann: Thanks for coming!\n".encode()), "whatsapp_ios.txt")
    assert [m.source_id for m in later.messages[:-1]] == [m.source_id for m in first.messages]


# -- Telegram ----------------------------------------------------------------------------


def test_telegram_single_chat_flattens_entities_notes_media_and_leaves_out_service_messages():
    got = load(telegram, "telegram_result.json")
    assert (len(got.messages), got.conversations, got.left_out) == (6, 1, {"service": 2, "empty": 1})
    by_id = {m.source_id: m for m in got.messages}
    assert by_id["4815162342:103"].content == "Yes! Here: https://tickets.example/abc (row F)"
    assert by_id["4815162342:104"].content == "[photo]\nThe view from my new office in Rotterdam"
    assert by_id["4815162342:105"].content == "[voice message]"
    assert by_id["4815162342:107"].content == "[sticker 😂]"
    assert by_id["4815162342:102"].timestamp == datetime(2023, 6, 1, 9, 5, tzinfo=UTC)  # date_unixtime, UTC
    assert by_id["4815162342:109"].timestamp == datetime(2023, 6, 2, 19, 0)  # only 'date': local, naive
    assert {m.session for m in got.messages} == {"4815162342"}
    assert [m.speaker for m in got.messages] == ["Maya", "Sam", "Maya", "Sam", "Maya", "Sam"]


def full_telegram_export() -> dict:
    chat = fixture_json("telegram_result.json")
    other = {
        "name": "Climbing club",
        "type": "private_group",
        "id": 777,
        "messages": [
            {
                "id": 1,
                "type": "message",
                "date": "2023-07-01T10:00:00",
                "date_unixtime": "1688205600",
                "from": "Ines",
                "text": "Wall at 6?",
            },
            {
                "id": 2,
                "type": "service",
                "date": "2023-07-01T10:01:00",
                "date_unixtime": "1688205660",
                "actor": "Ines",
                "action": "invite_members",
            },
        ],
    }
    left = {
        "name": "Old flat",
        "type": "private_group",
        "id": 99,
        "messages": [
            {
                "id": 5,
                "type": "message",
                "date": "2022-01-01T10:00:00",
                "date_unixtime": "1641031200",
                "from": "Landlord",
                "text": "Rent is due.",
            },
        ],
    }
    return {
        "about": "Here is the data you requested.",
        "personal_information": {"first_name": "Sam"},
        "contacts": {"list": [{"first_name": "Maya", "phone_number": "+31 6 1234"}]},
        "chats": {"about": "chats", "list": [chat, other]},
        "left_chats": {"about": "left", "list": [left]},
    }


def test_telegram_full_export_reads_every_chat_and_chooses_by_name():
    data = as_bytes(full_telegram_export())
    everything = telegram.read(io.BytesIO(data), "result.json")
    assert (len(everything.messages), everything.conversations) == (8, 3)
    assert everything.left_out == {"service": 3, "empty": 1}
    club = telegram.read(io.BytesIO(data), "result.json", Selection(("climbing CLUB",)))
    assert [(m.speaker, m.content, m.source_id) for m in club.messages] == [("Ines", "Wall at 6?", "777:1")]
    message = refused(telegram.read, data, Selection(("Nobody",)))
    assert "'Nobody'" in message and "'Maya', 'Climbing club', 'Old flat'" in message


@pytest.mark.parametrize(
    ("change", "needles"),
    [
        (lambda d: d["messages"][1].update(text={"a": 1}), ["chat '4815162342' message 102", "'text' is a JSON object"]),
        (lambda d: d["messages"][1].update(date_unixtime="soon"), ["message 102", "'date_unixtime' is 'soon'"]),
        (lambda d: d["messages"][2].pop("id"), ["'id' is None"]),
        (lambda d: d.pop("messages"), ["no 'messages' and no 'chats'"]),
    ],
)
def test_telegram_near_misses_name_the_chat_and_message(change, needles):
    data = fixture_json("telegram_result.json")
    change(data)
    message = refused(telegram.read, as_bytes(data))
    for needle in needles:
        assert needle in message, message


# -- OpenAI-style messages ---------------------------------------------------------------


def test_openai_json_conversations_with_their_own_times():
    got = load(openai_messages, "openai_messages.json")
    assert (len(got.messages), got.conversations, got.left_out) == (5, 2, {"system": 1, "tool": 2})
    assert [(m.speaker, m.source_id) for m in got.messages] == [
        ("user", "chat-garden:1"),
        ("assistant", "chat-garden:4"),
        ("user", "chat-garden:5"),
        ("Jonas", "chat-bike:0"),
        ("assistant", "chat-bike:1"),
    ]
    assert got.messages[2].content == "Here is the balcony.\n[image]"
    assert got.messages[0].timestamp == datetime(2024, 5, 1, 8, 0, 5, tzinfo=UTC)
    assert got.messages[3].timestamp == datetime(2024, 6, 1, 8, 0, tzinfo=UTC)  # "created": epoch seconds


def test_openai_jsonl_without_times_takes_the_default_one_second_apart():
    start = datetime(2024, 6, 1, 12, 0)
    got = load(openai_messages, "openai_messages.jsonl", default_timestamp=start)
    assert (len(got.messages), got.conversations, got.left_out) == (4, 2, {"system": 1})
    assert [m.timestamp for m in got.messages] == [start + timedelta(seconds=s) for s in (1, 2, 3, 4)]
    again = load(openai_messages, "openai_messages.jsonl", default_timestamp=start)
    assert [m.source_id for m in again.messages] == [m.source_id for m in got.messages]
    with pytest.raises(InputError, match=r"openai_messages.jsonl:1 message 0: no time .*--default-timestamp"):
        load(openai_messages, "openai_messages.jsonl")


@pytest.mark.parametrize(
    "data",
    [
        b'[{"role": "user", "content": "hi", "timestamp": "2024-01-01T10:00:00"},\n {"role": "assistant", "content": "hello", "timestamp": "2024-01-01T10:00:05"}]',
        b'{"role": "user", "content": "hi", "timestamp": "2024-01-01T10:00:00"}\n{"role": "assistant", "content": "hello", "timestamp": "2024-01-01T10:00:05"}\n',
        b'{\n "id": "c1",\n "messages": [{"role": "user", "content": "hi", "timestamp": "2024-01-01T10:00:00"}, {"role": "assistant", "content": "hello", "timestamp": "2024-01-01T10:00:05"}]\n}',
        b'[[{"role": "user", "content": [{"type": "text", "text": "hi"}], "created_at": "2024-01-01T10:00:00"}, {"role": "assistant", "content": "hello", "created_at": 1704103205}]]',
    ],
)
def test_openai_every_accepted_shape_reads_as_one_conversation(data):
    got = openai_messages.read(io.BytesIO(data), "m.json")
    assert [(m.speaker, m.content) for m in got.messages] == [("user", "hi"), ("assistant", "hello")]
    assert got.conversations == 1


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (
            b'[{"role": "user", "content": "x", "created": 1}]\n[{"content": "x", "timestamp": "2024-01-01T10:00:00"}]\n',
            "m.json:2 message 0: 'role' is None",
        ),
        (b'[{"role": "user", "content": 5, "timestamp": "2024-01-01T10:00:00"}]', "'content' is a JSON number"),
        (b'[{"role": "user", "content": "x", "timestamp": "soon"}]', "'timestamp' is 'soon'"),
        (
            b'{"role": "user", "content": "x", "timestamp": "2024-01-01T10:00:00"}\n[{"role": "user"}]\n',
            "m.json:2: a conversation after lines that were single messages",
        ),
        (b'[\n{"nothing": 1}\n]', "m.json: item 0: a JSON object with no 'messages' list"),
    ],
)
def test_openai_near_misses(data, needle):
    with pytest.raises(InputError) as info:
        openai_messages.read(io.BytesIO(data), "m.json")
    assert needle in info.value.message and "\n" not in info.value.message, info.value.message


# -- LongMemEval -------------------------------------------------------------------------


def test_longmemeval_several_records_need_a_choice_and_list_some_ids():
    with pytest.raises(InputError, match=r"holds 2 records; expected --conversation QUESTION_ID .*'q-moving-1', 'q-cat-2'"):
        load(longmemeval, "longmemeval_records.json")


def test_longmemeval_one_record_is_its_sessions_dated_one_second_apart():
    got = load(longmemeval, "longmemeval_records.json", selection=Selection(("q-moving-1",)))
    assert (len(got.messages), got.conversations, got.namespace) == (5, 2, "longmemeval:")
    assert [m.source_id for m in got.messages] == ["s-porto:0", "s-porto:1", "s-lisbon:0", "s-lisbon:1", "s-lisbon:2"]
    assert [m.timestamp for m in got.messages[2:]] == [datetime(2023, 11, 2, 8, 15, s) for s in range(3)]
    assert {m.session for m in got.messages} == {"s-porto", "s-lisbon"}


def test_longmemeval_two_records_share_a_session_once():
    got = load(longmemeval, "longmemeval_records.json", selection=Selection(("q-moving-1", "q-cat-2")))
    assert len(got.messages) == 7 and got.left_out == {"repeated session": 2, "empty": 1}
    assert "no LongMemEval conversation has the id or title 'q-9'" in refused(
        longmemeval.read, (EXPORTS / "longmemeval_records.json").read_bytes(), Selection(("q-9",))
    )


def test_longmemeval_dates_and_their_errors():
    assert longmemeval.parse_date("2023/05/30 (Tue) 23:40") == datetime(2023, 5, 30, 23, 40)
    assert longmemeval.parse_date("2023/5/3 9:05") == datetime(2023, 5, 3, 9, 5)
    for bad in ("2023-05-30 23:40", "2023/02/30 (Thu) 10:00", "", None):
        with pytest.raises(ValueError):
            longmemeval.parse_date(bad)
    data = fixture_json("longmemeval_records.json")[:1]
    data[0]["haystack_dates"][1] = "last Tuesday"
    assert "session 's-lisbon': the date is 'last Tuesday'" in refused(longmemeval.read, as_bytes(data))
    data[0]["haystack_dates"].pop()
    assert "2 session ids, 1 dates and 2 sessions" in refused(longmemeval.read, as_bytes(data))


# -- the selection -----------------------------------------------------------------------


def test_conversation_matches_an_id_exactly_or_a_title_in_any_case():
    by_title = load(chatgpt, "chatgpt_conversations.json", selection=Selection(("sourdough STARTER",)))
    assert {m.session for m in by_title.messages} == {"6553a1f0-sourdough"} and len(by_title.messages) == 4
    by_ids = load(chatgpt, "chatgpt_conversations.json", selection=Selection(("6553a1f0-regex", "Moving to Lisbon")))
    assert {m.session for m in by_ids.messages} == {"6553a1f0-regex", "6553a1f0-lisbon"}
    with pytest.raises(InputError, match="has the id or title '6553A1F0-REGEX'"):
        load(chatgpt, "chatgpt_conversations.json", selection=Selection(("6553A1F0-REGEX",)))  # ids are pasted, not typed


def test_since_and_until_are_inclusive_and_a_bare_until_date_is_the_whole_day():
    sel = Selection(since=parse_bound("2023-12-14", end=False), until=parse_bound("2023-12-14", end=True))
    got = load(chatgpt, "chatgpt_conversations.json", selection=sel)
    assert {m.session for m in got.messages} == {"6553a1f0-sourdough"}
    assert got.left_out["outside --since/--until"] == 8
    exact = Selection(since=parse_bound("2023-12-14T22:13:35+00:00", end=False), until=parse_bound("2023-12-14T22:14:20Z", end=True))
    assert [m.content for m in load(chatgpt, "chatgpt_conversations.json", selection=exact).messages] == [
        "No: an acetone smell means it is hungry. Feed it twice a day for a few days.",
        "I named it Gerald.",
    ]


def test_naive_times_and_bounds_compare_as_utc():
    # WhatsApp times are naive; an aware bound compares them as UTC.
    sel = Selection(since=parse_bound("2024-01-13T10:03:01+00:00", end=False), until=parse_bound("2024-01-13T12:15:00", end=True))
    got = load(whatsapp, "whatsapp_ios.txt", selection=sel)
    assert [m.content for m in got.messages] == ["My copy arrived, look at that cover", "👍", "Meeting at my place on the 20th, 7pm."]


def test_no_message_in_the_dates_is_one_line_saying_so():
    sel = Selection(since=parse_bound("2030-01-01", end=False))
    message = refused(chatgpt.read, (EXPORTS / "chatgpt_conversations.json").read_bytes(), sel)
    assert "no messages to read since 2030-01-01T00:00:00" in message and "12 outside --since/--until" in message


def test_the_selection_applies_to_nemori_jsonl_by_session():
    rows = [
        {"speaker": "Ann", "content": "a", "timestamp": "2023-05-08T10:00:00", "session": "s1"},
        {"speaker": "Bob", "content": "b", "timestamp": "2023-05-09T10:00:00", "session": "s2"},
    ]
    data = b"".join(as_bytes(r) + b"\n" for r in rows)
    got = formats.read("auto", io.BytesIO(data), "c.jsonl", selection=Selection(("s2",)))
    assert [m.content for m in got.messages] == ["b"] and got.format == "jsonl"
    got = formats.read("auto", io.BytesIO(data), "c.jsonl", selection=Selection(until=parse_bound("2023-05-08", end=True)))
    assert [m.content for m in got.messages] == ["a"] and got.left_out == {"outside --since/--until": 1}
    with pytest.raises(InputError, match="no message has the session 's3'; sessions: 's1', 's2'"):
        formats.read("jsonl", io.BytesIO(data), "c.jsonl", selection=Selection(("s3",)))


# -- detection ---------------------------------------------------------------------------


LOCOMO = {
    "qa": [{"question": "q", "answer": "a", "evidence": ["D1:1"], "category": 1}],
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "hi"}],
    },
    "sample_id": "conv-1",
}


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("chatgpt_conversations.json", "chatgpt"),
        ("claude_conversations.json", "claude"),
        ("whatsapp_ios.txt", "whatsapp"),
        ("whatsapp_android.txt", "whatsapp"),
        ("telegram_result.json", "telegram"),
        ("openai_messages.json", "openai"),
        ("openai_messages.jsonl", "openai"),
        ("longmemeval_records.json", "longmemeval"),
    ],
)
def test_every_fixture_is_detected_from_its_bytes_alone(name, fmt):
    assert detect.detect((EXPORTS / name).read_bytes()[: detect.PEEK], "input") == fmt


@pytest.mark.parametrize(
    ("data", "fmt"),
    [
        ((REPO / "examples" / "chat.jsonl").read_bytes(), "jsonl"),
        (as_bytes([LOCOMO]), "locomo"),
        (whatsapp_zip(b"31/12/2023, 21:43 - Carla: hi\n"), "whatsapp"),
        (as_bytes(full_telegram_export()), "telegram"),
        (json.dumps(full_telegram_export(), indent=2).encode(), "telegram"),
        (b'{"messages": [{"role": "user", "content": "hi"}]}\n', "openai"),
        (b'{"role": "user", "content": "hi"}\n', "openai"),
        (b'{"role": "Ann", "content": "hi", "timestamp": "2023-05-08T10:00:00"}\n', "jsonl"),
        (b'{"speaker": "Ann", "content": "hi"}\n', "jsonl"),
        (b'{"speaker": oops}\n', "jsonl"),  # broken, but a line of JSONL: its reader names the line
        (b"", "jsonl"),
        (b'[[{"role": "user", "content": "hi"}]]', "openai"),
    ],
)
def test_other_inputs_are_detected(data, fmt):
    assert detect.detect(data[: detect.PEEK], "input") == fmt


def test_a_long_first_item_is_still_told_by_its_keys_from_a_prefix():
    data = fixture_json("chatgpt_conversations.json")
    data[0] = {"summary": "x" * (2 * detect.PEEK), **data[0]}  # the mapping starts after the prefix...
    head = as_bytes(data)[: detect.PEEK]
    with pytest.raises(InputError, match="cannot tell its format: it starts as a JSON list whose first item has the keys 'summary'"):
        detect.detect(head, "big.json")
    data[0] = {"current_node": "aaaa-a4", **data[0]}  # ...but a key the format has is enough to choose its reader
    assert detect.detect(as_bytes(data)[: detect.PEEK], "big.json") == "chatgpt"


def test_an_undecidable_input_names_the_formats_it_was_compared_with_and_suggests_format():
    for data in (b"hello there\n", b'[{"foo": 1}]', b"\x00\x01\x02"):
        with pytest.raises(InputError) as info:
            detect.detect(data, "mystery.dat")
        message = info.value.message
        assert message.startswith("mystery.dat: cannot tell its format") and "--format" in message
        assert all(f in message for f in detect.FORMATS)
    assert detect.detect(b"hello there\n", "chat.txt") == "whatsapp"  # the name decides when the bytes cannot


def test_a_near_miss_detected_by_auto_gets_its_readers_error():
    data = fixture_json("chatgpt_conversations.json")
    del data[0]["mapping"]
    with pytest.raises(InputError, match=r"conversation 0 \('6553a1f0-lisbon'\): no 'mapping'"):
        formats.read("auto", io.BytesIO(as_bytes(data)), "conversations.json")


def test_the_cli_names_every_format_the_importers_read():
    import inspect
    import typing

    from nemori_cli.cli.ingest import ingest

    fmt = inspect.signature(ingest).parameters["fmt"]
    assert fmt.default == "auto"
    assert typing.get_args(typing.get_args(typing.get_type_hints(ingest, include_extras=True)["fmt"])[0]) == formats.NAMES
    assert set(formats.NAMES) == {"auto", *formats.EXPORTS, "jsonl", "locomo", "openai"}  # a reader for every name


# -- peeking and streaming ---------------------------------------------------------------


def test_peek_puts_back_what_it_read_from_a_pipe():
    data = bytes(range(256)) * 100
    pipe = io.BufferedReader(PeekedStream(b"", io.BytesIO(data)))  # not seekable, like stdin
    assert not pipe.seekable()
    head, stream = peek(pipe, 1000)
    assert head == data[:1000] and stream.read() == data


class SizedReadsOnly(io.RawIOBase):
    """A file that refuses to be read whole: every read must ask for a bounded size."""

    def __init__(self, data: bytes, limit: int = 1 << 20):
        self._data, self._pos, self._limit = data, 0, limit

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        assert size is not None and 0 <= size <= self._limit, f"read({size}): the reader loads the file whole"
        chunk = self._data[self._pos : self._pos + size]
        self._pos += len(chunk)
        return chunk

    def readinto(self, buffer) -> int:
        chunk = self.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


@pytest.mark.parametrize(
    ("module", "name", "selection"),
    [
        (chatgpt, "chatgpt_conversations.json", Selection()),
        (claude, "claude_conversations.json", Selection()),
        (telegram, "telegram_result.json", Selection()),
        (openai_messages, "openai_messages.json", Selection()),
        (longmemeval, "longmemeval_records.json", Selection(("q-cat-2",))),
    ],
)
def test_json_readers_read_in_bounded_chunks(module, name, selection):
    data = (EXPORTS / name).read_bytes()
    got = module.read(SizedReadsOnly(data), name, selection)
    assert got.messages == module.read(io.BytesIO(data), name, selection).messages


def _generator():
    spec = importlib.util.spec_from_file_location("make_chatgpt_export", REPO / "scripts" / "make_chatgpt_export.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_large_export_is_streamed_not_loaded(tmp_path):
    path = tmp_path / "conversations.json"
    _generator().main([str(path), "--conversations", "120", "--seed", "3"])
    size = path.stat().st_size
    assert size > 2_000_000
    tracemalloc.start()
    try:
        with path.open("rb") as f:
            got = chatgpt.read(f, "conversations.json", Selection(("Moving to Edinburgh",)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got.conversations == 1 and len(got.messages) >= 4
    assert peak < size / 4, f"peak {peak:,} bytes for a {size:,}-byte file: it was loaded, not streamed"


def test_the_generated_export_has_the_shape_it_promises(tmp_path):
    path = tmp_path / "conversations.json"
    gen = _generator()
    gen.main([str(path), "--conversations", "40", "--seed", "11"])
    again = tmp_path / "again.json"
    gen.main([str(again), "--conversations", "40", "--seed", "11"])
    assert path.read_bytes() == again.read_bytes()  # deterministic by seed
    with path.open("rb") as f:
        got = chatgpt.read(f, "conversations.json")
    assert got.conversations == 40 and got.left_out["system"] == 40 and got.left_out.get("tool", 0) > 0
    words = [len(m.content.split()) for m in got.messages if m.speaker == "assistant"]
    assert min(words) >= 300 and max(words) <= 800
    raw = json.loads(path.read_text(encoding="utf-8"))
    branches = sum(1 for c in raw for n in c["mapping"].values() if len(n["children"]) > 1)
    assert branches > 0  # regenerated answers and edited questions left behind
    cities = [("Edinburgh" in m.content, "Manchester" in m.content) for m in got.messages]
    assert any(e for e, _ in cities) and any(m for _, m in cities)
    dates = sorted(m.timestamp for m in got.messages)
    assert (dates[-1] - dates[0]).days > 300


# -- the CLI -----------------------------------------------------------------------------


@pytest.fixture
def cli(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("name", "extra", "fmt", "read", "conversations", "left_out"),
    [
        ("chatgpt_conversations.json", [], "chatgpt", 12, 3, 7),
        ("claude_conversations.json", [], "claude", 6, 2, 2),
        ("whatsapp_ios.txt", [], "whatsapp", 9, 1, 4),
        ("whatsapp_android.txt", [], "whatsapp", 5, 1, 5),
        ("telegram_result.json", [], "telegram", 6, 1, 3),
        ("openai_messages.json", [], "openai", 5, 2, 3),
        ("openai_messages.jsonl", ["--default-timestamp", "2024-06-01T12:00:00"], "openai", 4, 2, 1),
        ("longmemeval_records.json", ["--conversation", "q-moving-1"], "longmemeval", 5, 2, 0),
    ],
)
def test_ingest_dry_run_on_each_export_without_a_model(cli, name, extra, fmt, read, conversations, left_out):
    result = nemori("ingest", EXPORTS / name, *extra, "--dry-run", "--json", "--db", cli / "x.db")
    assert result.exit_code == 0, (result.output, result.exception)
    plan = json.loads(result.stdout)
    assert (plan["format"], plan["read"], plan["conversations"], sum(plan["left_out"].values())) == (fmt, read, conversations, left_out)
    assert plan["messages"] == read and plan["tokens"] > 0 and plan["minutes"] > 0
    assert not (cli / "x.db").exists()
    assert "left out" not in result.stderr  # --json: in the report only


def test_ingest_dry_run_text_says_conversations_and_what_was_left_out(cli):
    result = nemori("ingest", EXPORTS / "chatgpt_conversations.json", "--dry-run", "--db", cli / "x.db")
    assert result.exit_code == 0, result.output
    assert "read 12 messages in 3 conversations (7 left out) from" in result.stdout
    assert "minutes of LLM time" in result.stdout
    assert result.stderr.splitlines() == ["nemori: left out 7 messages: 4 tool, 1 empty, 1 hidden, 1 system"]


def test_ingest_a_zip_from_stdin(cli):
    data = whatsapp_zip((EXPORTS / "whatsapp_android.txt").read_bytes())
    from typer.testing import CliRunner

    from nemori_cli.cli.app import app

    result = CliRunner().invoke(app, ["ingest", "-", "--dry-run", "--json", "--db", str(cli / "x.db")], input=data)
    assert result.exit_code == 0, (result.output, result.exception)
    assert json.loads(result.stdout)["read"] == 5


def test_ingest_an_export_twice_adds_nothing_the_second_time(cli, monkeypatch):
    use_fakes(monkeypatch)
    db = cli / "memory.db"
    first = nemori("ingest", EXPORTS / "chatgpt_conversations.json", "--json", "--db", db)
    assert first.exit_code == 0, (first.output, first.exception)
    report = json.loads(first.stdout)
    assert (report["read"], report["added"], report["format"], report["conversations"]) == (12, 12, "chatgpt", 3)
    assert report["left_out"] == {"system": 1, "hidden": 1, "tool": 4, "empty": 1}
    again = json.loads(nemori("ingest", EXPORTS / "chatgpt_conversations.json", "--json", "--db", db).stdout)
    assert (again["read"], again["added"], again["changed"]) == (12, 0, 0)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--since", "yesterday"], "--since 'yesterday' is not a date"),
        (["--since", "2024-02-01", "--until", "2024-01-01"], "is after --until"),
        (["--sample", "conv-1"], "--sample and --sessions apply to --format locomo only"),
        (["--conversation", "nope"], "no ChatGPT conversation has the id or title 'nope'"),
        (["--format", "claude"], "no 'uuid'"),
    ],
)
def test_ingest_bad_choices_exit_2_with_one_line(cli, args, needle):
    from tests.support.cli import run_nemori

    env = {"NEMORI_CACHE_DIR": str(cli / "cache"), "XDG_CONFIG_HOME": str(cli / "config")}
    code, out, err = run_nemori(["ingest", str(EXPORTS / "chatgpt_conversations.json"), "--dry-run", "--db", str(cli / "x.db"), *args], env)
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, (code, out, err)


def test_a_csv_file_is_told_how_to_become_input_not_to_pass_format():
    """No --format reads CSV, so the line says what to make of it instead (issue 44)."""
    with pytest.raises(InputError) as info:
        detect.detect(b"speaker,content,timestamp\nAnn,hi,2024-01-01\n", "chat.csv")
    message = info.value.message
    assert message.startswith("chat.csv: cannot tell its format") and "pass --format" not in message
    assert "make it JSON Lines" in message and '"speaker"' in message
    with pytest.raises(InputError, match="if it is one of them, pass --format to say which"):
        detect.detect(b"hello there\n", "mystery.dat")
