"""Chat exports in and memory out, with the real stack: each format ingested end to end with the tiny model, then export → import-memory → the same bytes."""

from __future__ import annotations

import pytest

from tests.integration.conftest import REPO, run_json, run_nemori

pytestmark = pytest.mark.integration

EXPORTS = REPO / "tests" / "fixtures" / "exports"

# file, extra arguments, the format --format auto must find, messages taken
CASES = [
    ("chatgpt_conversations.json", (), "chatgpt", 12),
    ("claude_conversations.json", (), "claude", 6),
    ("whatsapp_ios.txt", (), "whatsapp", 9),
    ("whatsapp_android.txt", (), "whatsapp", 5),
    ("telegram_result.json", (), "telegram", 6),
    ("openai_messages.json", (), "openai", 5),
    ("openai_messages.jsonl", ("--default-timestamp", "2024-05-01T09:00:00"), "openai", None),
    ("longmemeval_records.json", ("--conversation", "q-moving-1"), "longmemeval", None),
]


@pytest.mark.parametrize(("name", "extra", "fmt", "taken"), CASES, ids=[c[0] for c in CASES])
def test_each_export_format_becomes_memory(tmp_path, name, extra, fmt, taken):
    db = str(tmp_path / "m.db")
    report = run_json("ingest", str(EXPORTS / name), *extra, "--db", db)
    assert report["format"] == fmt
    if taken is not None:
        assert report["read"] == taken
    assert report["added"] == report["read"] > 0
    assert report["pending"] == 0 and report["episodes"] >= 1
    episodes = run_json("inspect", "episodes", "--db", db)["episodes"]
    assert sum(len(e["messages"]) for e in episodes) == report["read"]  # every message taken sits in one episode
    again = run_json("ingest", str(EXPORTS / name), *extra, "--db", db)
    assert again["added"] == 0  # stable ids: the same export twice adds nothing


def test_an_almost_chatgpt_export_is_refused_in_one_line_and_writes_nothing(tmp_path):
    broken = tmp_path / "conversations.json"
    text = (EXPORTS / "chatgpt_conversations.json").read_text(encoding="utf-8")
    broken.write_text(text.replace('"mapping"', '"mappings"', 1), encoding="utf-8")
    db = tmp_path / "m.db"
    proc = run_nemori("ingest", str(broken), "--db", str(db))
    assert proc.returncode == 2
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "chatgpt" in lines[0].lower() and "Traceback" not in proc.stderr.decode()
    assert not db.exists()


def test_export_then_import_memory_gives_the_same_inspect_and_search(tmp_path):
    src, dst = str(tmp_path / "src.db"), str(tmp_path / "dst.db")
    assert run_nemori("ingest", str(EXPORTS / "chatgpt_conversations.json"), "--db", src).returncode == 0
    dump = tmp_path / "memory.jsonl"
    proc = run_nemori("export", "--db", src, "--out", str(dump))
    assert proc.returncode == 0, proc.stderr.decode()
    proc = run_nemori("import-memory", str(dump), "--db", dst)
    assert proc.returncode == 0, proc.stderr.decode()
    for view in (("inspect", "episodes", "--all"), ("inspect", "facts", "--all"), ("inspect", "messages")):
        before, after = run_nemori(*view, "--db", src, "--json"), run_nemori(*view, "--db", dst, "--json")
        assert before.returncode == after.returncode == 0
        assert before.stdout == after.stdout, view
    before = run_json("search", "trip", "--db", src)
    after = run_json("search", "trip", "--db", dst)
    before.pop("ms"), after.pop("ms")
    assert before == after and before["hits"]
