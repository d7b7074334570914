"""An export saved as UTF-16 with its byte order mark (what a Windows editor calls "Unicode") reads as its UTF-8 twin."""

from __future__ import annotations

import io

import pytest

from nemori_cli.errors import InputError
from nemori_cli.importers.given import read_export
from tests.conftest import REPO

EXPORTS = REPO / "tests" / "fixtures" / "exports"
FILES = [REPO / "examples" / "chat.jsonl", EXPORTS / "chatgpt_conversations.json", EXPORTS / "claude_conversations.json"]


def _utf16(text: str, order: str) -> bytes:
    return b"\xff\xfe" + text.encode("utf-16-le") if order == "le" else b"\xfe\xff" + text.encode("utf-16-be")


def _messages(imported):
    return [(m.speaker, m.content, m.timestamp, m.source_id) for m in imported.messages]


@pytest.mark.parametrize("order", ["le", "be"])
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_utf16_reads_as_the_utf8_file_does(path, order):
    plain = read_export(path)
    again = read_export(path.name, stream=io.BytesIO(_utf16(path.read_text(encoding="utf-8"), order)))
    assert again.format == plain.format and _messages(again) == _messages(plain) and plain.messages


def test_utf16_that_is_cut_short_is_one_line_naming_the_encoding():
    data = _utf16((REPO / "examples" / "chat.jsonl").read_text(encoding="utf-8"), "le")[:-1]
    with pytest.raises(InputError, match="starts as UTF-16 text but is not UTF-16"):
        read_export("cut.jsonl", stream=io.BytesIO(data))
