"""A chat export's long assistant turns: stored whole, read clipped, and estimated as read."""

from __future__ import annotations

import json

from nemori_cli.stages import MESSAGE_CHARS_READ
from tests.unit.fake_ingest import isolate, nemori, use_fakes, write_jsonl

LONG = "Here is a detailed plan for the kayak trip. " * 100  # 4,400 characters, as assistants write


def _rows():
    return [
        {"id": "1", "speaker": "user", "content": "Plan my kayak trip, please.", "timestamp": "2024-05-01T10:00:00"},
        {"id": "2", "speaker": "assistant", "content": LONG, "timestamp": "2024-05-01T10:00:30"},
    ]


def test_a_long_turn_is_kept_whole_but_read_clipped(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    built = use_fakes(monkeypatch)
    db = tmp_path / "m.db"
    assert nemori("ingest", write_jsonl(tmp_path / "c.jsonl", _rows()), "--db", db).exit_code == 0
    shown = json.loads(nemori("inspect", "messages", "--db", db, "--json").stdout)
    stored = (
        {m["speaker"]: m["content"] for m in shown["messages"]} if isinstance(shown, dict) else {m["speaker"]: m["content"] for m in shown}
    )
    assert stored["assistant"] == LONG  # nothing of the message is lost
    narration = [m for m, s in built[0].history if s.get("title") == "Narrative"]
    said = narration[0][-1]["content"]
    assert LONG[:100] in said and LONG not in said
    assert len(said) < len(LONG) // 4


def test_the_dry_run_counts_characters_as_read(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    plan = json.loads(nemori("ingest", write_jsonl(tmp_path / "c.jsonl", _rows()), "--db", tmp_path / "m.db", "--dry-run", "--json").stdout)
    assert plan["characters"] == len(_rows()[0]["content"]) + MESSAGE_CHARS_READ
