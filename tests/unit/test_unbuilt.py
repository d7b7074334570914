"""The memory after `ingest --build later`, before `nemori build` (issue 44).

Until the build runs, the stored messages are the memory: searchable and
answerable at once. So wherever the memory is shown (the journal, the view,
stats) they are shown too, and what shows them changes once they are built.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from importlib import resources

import pytest

from nemori_cli import deps
from nemori_cli.cli import options as opt
from nemori_cli.cli.view_cmd import ViewData, serve
from tests.unit.fake_ingest import conversation, isolate, nemori, use_fakes, write_jsonl


@pytest.fixture
def stored(tmp_path, monkeypatch):
    """16 messages over four days, stored with --build later: nothing built."""
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    db = tmp_path / "m.db"
    run = nemori("ingest", write_jsonl(tmp_path / "chat.jsonl", conversation()), "--db", db, "--build", "later")
    assert run.exit_code == 0, run.output
    return tmp_path, db


def _journal(tmp_path, db, name: str) -> dict[str, str]:
    run = nemori("export", "--format", "markdown", "--db", db, "--out", tmp_path / name)
    assert run.exit_code == 0, run.output
    return {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / name).iterdir()}


def _view(db) -> dict:
    """What the page reads of the unbuilt messages, over HTTP from a real server, and its summary."""
    session = deps.session(opt.settings(str(db), "default"))
    server = serve(ViewData(session.db, "default"))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with urllib.request.urlopen(base + "/api/unbuilt", timeout=10) as answer:
            unbuilt = json.loads(answer.read())
        with urllib.request.urlopen(base + "/api/episodes", timeout=10) as answer:
            episodes = json.loads(answer.read())
    finally:
        server.shutdown()
        server.server_close()
        session.db.close()
    return {"unbuilt": unbuilt["messages"], "episodes": episodes["episodes"]}


def test_the_unbuilt_memory_is_shown_in_the_journal_the_view_and_stats_until_it_is_built(stored, monkeypatch):
    tmp_path, db = stored

    # The journal: every message, as said, in its month and day; the index says what they are and how to build them.
    files = _journal(tmp_path, db, "before")
    assert set(files) == {"index.md", "2023-05.md"}
    index, may = files["index.md"], files["2023-05.md"]
    assert "Nothing has been remembered yet" not in index
    assert "16 messages from 8 May 2023 to 11 May 2023 are not built into episodes yet" in index
    assert "`nemori build` builds them" in index and "nemori flush" not in index
    assert "- [May 2023](2023-05.md): 16 messages not built yet" in index
    assert "## Monday 8 May 2023 · messages not built into episodes yet" in may
    assert "- 10:00 **Ann**: Let us talk about the kayak again, point 0." in may
    assert may.count("\n- ") == 16

    # The view: the page asks for them (app.js) and the server gives them, oldest first; no episode yet.
    seen = _view(db)
    assert seen["episodes"] == [] and len(seen["unbuilt"]) == 16
    assert seen["unbuilt"][0]["content"] == "Let us talk about the kayak again, point 0." and seen["unbuilt"][0]["episode_id"] is None
    script = resources.files("nemori_cli.cli").joinpath("view_static", "app.js").read_text(encoding="utf-8")
    assert 'get("/api/unbuilt")' in script and "not built into episodes yet" in script

    # stats: in words, the unbuilt messages counted, no empty table with cut-off headers.
    monkeypatch.setenv("COLUMNS", "80")
    text = nemori("stats", "--db", db).output
    assert "16 messages (16 not built yet), 0 episodes, 0 facts\n" in text
    assert "nothing built yet; 16 messages" in text and "no model calls yet" in text
    assert "_" not in text.splitlines()[1] and "…" not in text and "┏" not in text

    # Built: the episodes take the messages' place everywhere.
    assert nemori("build", "--db", db).exit_code == 0
    files = _journal(tmp_path, db, "after")
    assert "not built" not in files["index.md"] + files["2023-05.md"]
    assert "4 episodes from 8 May 2023 to 11 May 2023" in files["index.md"]
    seen = _view(db)
    assert seen["unbuilt"] == [] and len(seen["episodes"]) == 4
    text = nemori("stats", "--db", db).output
    assert "16 messages, 4 episodes" in text and "everything is built" in text and "not built" not in text
    table = text[text.index("stage") :].splitlines()
    assert table[0].split() == ["stage", "calls", "tries", "tokens", "tokens", "seconds", "failed", "fixed", "back", "decided"]
    assert any(line.startswith("narration") for line in table)
    assert all(len(line) <= 80 for line in table) and "…" not in text


def test_ingesting_the_same_file_again_says_nothing_was_new(stored):
    tmp_path, db = stored
    chat = tmp_path / "chat.jsonl"
    # The lines wrap at 80 columns where the temporary path puts them (pytest's folder number moves it): read the words.
    later = " ".join(nemori("ingest", chat, "--db", db, "--build", "later").output.split())
    assert "read 16 messages (0 new) from" in later and "all stored before: nothing new to store" in later
    assert "stored them in" not in later and "16 messages are pending" in later
    assert nemori("build", "--db", db).exit_code == 0
    now = " ".join(nemori("ingest", chat, "--db", db, "--build", "now").output.split())
    assert "(0 new) from" in now and "nothing new to store or build; 0 messages pending" in now and "made 0 episodes" not in now


def test_search_takes_a_limit_scores_out_of_100_and_names_a_message_as_inspect_does(stored):
    tmp_path, db = stored
    text = nemori("search", "kayak", "-n", "3", "--db", db).output.splitlines()
    assert len(text) == 4 and re.match(r"\[?3 of \d+ hits \(-n \d+ shows all\) in ", text[-1]), text
    first = re.match(r"(M\d+) 2023-05-08 10:0\d  relevance (\d+)  (Ann|Bob): Let us talk about the kayak", text[0])
    assert first and 0 < int(first[2]) <= 100, text[0]
    assert "score 0." not in "\n".join(text)
    listed = nemori("inspect", "messages", "--db", db).output
    assert re.search(rf"^\s*{first[1]}\s+pending 2023-05-08", listed, re.M), listed  # the same id in both commands

    data = json.loads(nemori("search", "kayak", "--limit", "2", "--json", "--db", db).output)
    assert len(data["hits"]) == 2 and data["more"] >= 1
    assert all(isinstance(h["relevance"], int) and 0 <= h["relevance"] <= 100 for h in data["hits"])
    assert data["hits"][0]["relevance"] >= data["hits"][1]["relevance"]


def test_slow_work_says_one_line_on_stderr_and_quick_work_nothing(capsys):
    import time

    from nemori_cli.cli.progress import slow_note

    with slow_note(True, "loading the model…", after=0.05):
        time.sleep(0.5)
    with slow_note(True, "never said", after=5.0):
        pass
    with slow_note(False, "not wanted", after=0.0):
        time.sleep(0.2)
    assert capsys.readouterr().err == "nemori: loading the model…\n"


def test_ask_says_it_is_loading_when_that_takes_a_while(stored, monkeypatch):
    import time

    from nemori_cli.cli import progress
    from nemori_cli.retrieval import answer
    from tests.unit.fake_ingest import use_fake_answers

    tmp_path, db = stored
    use_fake_answers(monkeypatch)
    monkeypatch.setattr(progress, "SLOW_S", 0.05)
    real = answer.ask
    monkeypatch.setattr(answer, "ask", lambda *a, **k: time.sleep(0.5) or real(*a, **k))  # a model that takes its time
    run = nemori("ask", "what about the kayak?", "--db", db, "--progress", "--profile", "budget")
    assert run.exit_code == 0, run.output
    assert "nemori: loading the answer model and reading the memory" in run.stderr
    quiet = nemori("ask", "what about the kayak?", "--db", db, "--quiet", "--profile", "budget")
    assert "loading the answer model" not in quiet.stderr
