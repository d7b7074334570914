"""Control characters in what was said: stored as given, never sent raw to a terminal or a Markdown file (issue 35, 4).

The rule: the memory keeps what the chat held (a NUL in a speaker's name, an
escape sequence in a message); every output path shows it visibly: the
terminal and Markdown as \\xNN, --json and MCP as JSON's own \\u escapes.
"""

from __future__ import annotations

import json

from tests.unit.fake_ingest import isolate, nemori, use_fakes, write_jsonl

SPEAKER = "Ann\x00Lee"
CONTENT = "bell\x07 and clear-screen \x1b[2J done"
RAW = ("\x00", "\x07", "\x1b")


def _world(tmp_path, monkeypatch):
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    rows = [
        {"speaker": SPEAKER, "content": CONTENT, "timestamp": "2024-03-04T10:00:00"},
        {"speaker": "Bob", "content": "ok, the kayak is ready", "timestamp": "2024-03-04T10:01:00"},
        {"speaker": "Bob", "content": "see you at the kayak club", "timestamp": "2024-03-04T10:02:00"},
    ]
    db = tmp_path / "m.db"
    assert nemori("ingest", write_jsonl(tmp_path / "c.jsonl", rows), "--db", db).exit_code == 0
    return db


def test_the_terminal_shows_control_characters_as_escapes(tmp_path, monkeypatch):
    db = _world(tmp_path, monkeypatch)
    shown = nemori("inspect", "messages", "--db", db)
    assert shown.exit_code == 0, shown.output
    assert not any(c in shown.output for c in RAW), repr(shown.output)
    assert "Ann\\x00Lee" in shown.output and "\\x1b[2J" in shown.output


def test_json_keeps_them_exactly_escaped_by_json(tmp_path, monkeypatch):
    db = _world(tmp_path, monkeypatch)
    out = nemori("inspect", "messages", "--db", db, "--json").output
    assert not any(c in out for c in RAW)  # JSON writes \\u0000, never the byte
    messages = json.loads(out)["messages"]
    assert (messages[0]["speaker"], messages[0]["content"]) == (SPEAKER, CONTENT)  # stored as given


def test_the_markdown_journal_has_no_raw_control_characters(tmp_path, monkeypatch):
    db = _world(tmp_path, monkeypatch)
    folder = tmp_path / "journal"
    result = nemori("export", "--db", db, "--format", "markdown", "--out", folder)
    assert result.exit_code == 0, result.output
    texts = [p.read_text() for p in folder.rglob("*.md")]
    assert texts and not any(c in t for t in texts for c in RAW)


def test_every_line_the_journal_writes_of_memory_text_goes_through_the_same_rule():
    """The fakes' narratives hold no control characters, so the journal's own line maker is checked directly."""
    from nemori_cli.cli.journal import _line

    assert _line("F1\x00 " + CONTENT) == "F1\\x00 bell\\x07 and clear-screen \\x1b[2J done"
