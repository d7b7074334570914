"""`nemori export` and `nemori import-memory`: a lossless round trip, one user only, refusals that write nothing, a journal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from nemori_cli import deps
from nemori_cli.embed.fake import FakeEmbedder
from nemori_cli.errors import NemoriError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.llm.fake import FakeBackend
from nemori_cli.store import export
from nemori_cli.store.migrations import MIGRATIONS
from nemori_cli.store.sqlite import SqliteStore
from tests.conftest import REPO
from tests.unit.fake_ingest import isolate, nemori, write_jsonl

NEWEST = max(m[0] for m in MIGRATIONS)
TOPICS = ("kayak", "piano", "paddle", "garden", "bakery", "zither", "quokka")
FACTS = {  # per topic, what the fake model distils; the pilot outdates the nurse (a superseded fact)
    "kayak": ["Ann owns a red kayak."],
    "piano": ["Bob plays the piano every evening.", "Ann works as a nurse."],
    "paddle": ["Ann paddles her red kayak every week."],
    "garden": ["Ann quit nursing and now works as a pilot.", "Bob grows tomatoes in his garden."],
}


def topic_of(text: str, last: bool = False) -> str:
    """The topic named first in a prompt (a merge shows the earlier part first), or last (the newest messages)."""
    found = [(text.rindex(t) if last else text.index(t), t) for t in TOPICS if t in text]
    return (max(found) if last else min(found))[1] if found else "talk"


def answer(messages, schema) -> dict:
    """The fake model: titles and facts by topic; paddling continues the kayak day (a merged episode)."""
    title = schema.get("title")
    prompt = "\n".join(m["content"] for m in messages)
    topic = topic_of(prompt)
    if title == "Partition":
        return {"boundaries": []}
    if title in ("Narrative", "MergedEpisode"):
        return {
            "title": f"Ann and Bob on the {topic}",
            "narrative": f"Ann and Bob talked about the {topic}, and Ann said she would come back to it.",
        }
    if title == "Continuation":
        earlier, _, new = messages[-1]["content"].partition("NEW episode:")
        if "Lisbon" in earlier:  # the integration self-check's fixed cases
            return {"same_event": "Lisbon" in new}
        return {"same_event": "kayak" in earlier and "paddle" in new}
    if title == "Outdated":
        older, _, newer = prompt.partition("NEWER fact:")
        return {"outdated": "quit" in newer and "nurse" in older}
    if title == "Distilled":
        return {"facts": FACTS.get(topic_of(prompt, last=True), [])}
    if title == "NoteAttributes":
        return {"keywords": [topic], "context": f"Ann and Bob talk about the {topic}.", "tags": [topic]}
    if title == "LinkDecision":
        offered = [
            int(line[1:].split("]", 1)[0])
            for line in messages[-1]["content"].split("Nearby memories:\n", 1)[1].splitlines()
            if line.startswith("[")
        ]
        updates = [{"id": offered[0], "context": f"Ann and Bob came back to the {topic}.", "tags": [topic, "again"]}] if offered else []
        return {"links": offered, "updates": updates}
    return {"Prediction": {"prediction": "Ann and Bob talked."}, "Summary": {"summary": f"Ann and Bob talked, last about the {topic}."}}[
        title
    ]


def chat(topics, start=datetime(2023, 5, 8, 10, 0), per_topic=4, who=("Ann", "Bob")) -> list[dict]:
    """One topic a day, per_topic messages a minute apart."""
    return [
        {
            "id": f"{topic}-{day}-{i}",
            "speaker": who[i % 2],
            "content": f"Let us talk about the {topic} again, point {i}.",
            "timestamp": (start + timedelta(days=day, minutes=i)).isoformat(),
        }
        for day, topic in enumerate(topics)
        for i in range(per_topic)
    ]


@pytest.fixture
def world(monkeypatch, tmp_path):
    """The CLI with the fake model and embedder; returns tmp_path."""
    isolate(monkeypatch, tmp_path)
    monkeypatch.setattr(deps, "build_llm", lambda settings: StructuredLLM(FakeBackend(default=answer, model_id="fake")))
    monkeypatch.setattr(deps, "build_embedder", lambda settings, db=None: FakeEmbedder())
    monkeypatch.setattr(deps, "check_embedder_files", lambda settings: None)
    return tmp_path


def ok(*args) -> str:
    run = nemori(*args)
    assert run.exit_code == 0, (args, run.output, run.exception)
    return run.stdout


def build(tmp: Path, name: str, memory: str = "native", user: str = "ann", topics=("kayak", "piano", "paddle", "garden")) -> Path:
    """A memory made by `nemori ingest`, and a tail left pending by a --no-flush ingest."""
    db = tmp / f"{name}.db"
    ok("ingest", write_jsonl(tmp / f"{name}-{user}.jsonl", chat(topics)), "--db", db, "--user", user, "--memory", memory)
    tail = chat(("bakery",), start=datetime(2023, 6, 2, 9, 0), per_topic=3)
    ok("ingest", write_jsonl(tmp / f"{name}-{user}-tail.jsonl", tail), "--db", db, "--user", user, "--no-flush")
    return db


def dump(path: Path) -> dict[str, list]:
    """Every row of every table but SQLite's and the virtual tables' storage, found without store/export.py's help."""
    db = SqliteStore(path, create=False)
    try:
        out = {}
        for r in db.query("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            name = r["name"]
            if name == "schema_migrations":
                out[name] = db.query("SELECT id, name FROM schema_migrations ORDER BY id")  # applied_at: when this file was made
            elif "fts5vocab" in r["sql"]:
                out[name] = db.query(f"SELECT * FROM {name} ORDER BY term")
            elif "USING vec0" in r["sql"]:
                out[name] = db.query(f"SELECT rowid, user_id, embedding FROM {name} ORDER BY rowid")
            elif "USING fts5" in r["sql"]:
                out[name] = db.query(f"SELECT rowid, * FROM {name} ORDER BY rowid")
            elif not _storage(db, name):
                out[name] = db.query(
                    f"SELECT rowid, * FROM {name} ORDER BY rowid"
                    if "WITHOUT ROWID" not in r["sql"]
                    else f"SELECT * FROM {name} ORDER BY 1, 2"
                )
        return out
    finally:
        db.close()


def _storage(db, name: str) -> bool:
    virtual = [r["name"] for r in db.query("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL%'")]
    return any(name.startswith(v + "_") for v in virtual) or name.startswith("sqlite_")


def shown(db: Path, user: str = "ann") -> dict[str, str]:
    """What the read commands print about this memory; the timing of a search aside."""
    out = {}
    for args in (
        ("inspect", "episodes", "--all"),
        ("inspect", "facts", "--all"),
        ("inspect", "messages"),
        ("inspect", "notes"),
        ("inspect", "summary", "--history"),
        ("inspect", "episode", "1"),
        ("inspect", "fact", "2"),
    ):
        for json_flag in ((), ("--json",)):
            run = nemori(*args, *json_flag, "--db", db, "--user", user)
            out[" ".join(args + json_flag)] = (run.exit_code, run.stdout)
    for query in ("kayak nurse", "what does Bob play", "tomatoes garden", "bakery"):
        text = ok("search", query, "--db", db, "--user", user)
        out[f"search {query}"] = re.sub(r"in [\d.]+ ms", "in _ ms", text)
        hits = json.loads(ok("search", query, "--json", "--db", db, "--user", user))
        hits.pop("ms")
        out[f"search --json {query}"] = hits
    stats = json.loads(ok("stats", "--json", "--db", db, "--user", user))
    out["stats"] = {k: v for k, v in stats.items() if k not in ("db", "db_bytes")}
    return out


def refused(run, code: int) -> str:
    """The one-line message of a command that failed as a user's error (app.main prints it and exits with its code)."""
    assert isinstance(run.exception, NemoriError) and run.exception.exit_code == code, (run.output, run.exception)
    assert "\n" not in run.exception.message
    return run.exception.message


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- the round trip -------------------------------------------------------------


@pytest.mark.parametrize("memory", ["native", "amem", "summary", "nemori+amem"])
def test_export_then_import_restores_every_row_and_every_answer(world, memory):
    src = build(world, "src", memory)
    ok("export", "--db", src, "--user", "ann", "--out", world / "ann.jsonl")
    ok("import-memory", world / "ann.jsonl", "--db", world / "restored.db")

    before, after = dump(src), dump(world / "restored.db")
    assert after.keys() == before.keys()
    for table in before:
        assert after[table] == before[table], table
    assert shown(world / "restored.db") == shown(src)
    # The restored file exports to the same lines, its time of export aside.
    ok("export", "--db", world / "restored.db", "--user", "ann", "--out", world / "again.jsonl")
    first, again = lines(world / "ann.jsonl"), lines(world / "again.jsonl")
    first[0].pop("exported_at"), again[0].pop("exported_at")
    assert again == first


def test_the_world_has_what_the_round_trip_must_carry(world):
    """Merged episodes, a superseded fact, pending messages, telemetry; notes, links and evolutions in amem."""
    counts = json.loads(ok("stats", "--json", "--db", build(world, "native"), "--user", "ann"))["counts"]
    assert counts["merged_episodes"] >= 1 and counts["superseded_facts"] >= 1 and counts["pending"] == 3 and counts["facts"] >= 3
    counts = json.loads(ok("stats", "--json", "--db", build(world, "amem", "amem"), "--user", "ann"))["counts"]
    assert counts["notes"] >= 10 and counts["note_links"] >= 1 and counts["evolved_notes"] >= 1


def test_the_export_format(world):
    src = build(world, "src")
    records = [json.loads(line) for line in ok("export", "--db", src, "--user", "ann").splitlines()]  # stdout by default
    header, rows, end = records[0], records[1:-1], records[-1]
    assert (header["nemori_export"], header["schema"], header["user"], header["embedder"]) == (1, NEWEST, "ann", "fake-bow:64")
    assert header["profile"]["memory"] == "native" and header["method"].startswith("--memory native")
    assert json.loads(header["meta"]["profile"])["memory"] == "native" and header["exported_at"]
    tables = [r["table"] for r in rows]
    assert {"messages", "episodes", "facts", "fact_sources", "llm_calls", "episode_fts", "episode_vec", "fact_vec"} <= set(tables)
    assert not [t for t in tables if t.endswith(("_data", "_idx", "_content", "_docsize", "_config", "_terms", "_chunks", "_rowids"))]
    assert end["nemori_export_end"] is True and {t: n for t, n in end["rows"].items() if n} == dict(Counter(tables))
    old = next(r["row"] for r in rows if r["table"] == "facts" and r["row"]["status"] == "superseded")
    assert old["text"] == "Ann works as a nurse." and old["superseded_by"] and "outdated by" in old["superseded_reason"]
    vector = next(r for r in rows if r["table"] == "episode_vec")
    assert set(vector) == {"table", "rowid", "row"} and len(vector["row"]["embedding"]["base64"]) == 4 * ((64 * 4 + 2) // 3)


def test_every_table_of_the_schema_is_exported_or_derived(db):
    """A migration that adds a table no user owns makes export refuse; this catches it here first."""
    db.bind_embedder("fake-bow:64", 64)
    found = {t.name: t.kind for t in export.tables(db)}
    assert {n for n, k in found.items() if k == "rows"} >= {
        "messages",
        "episodes",
        "facts",
        "fact_sources",
        "summaries",
        "notes",
        "note_links",
        "note_evolutions",
        "llm_calls",
        "stage_events",
    }
    assert {n for n, k in found.items() if k == "vectors"} == {"episode_vec", "fact_vec", "note_vec", "message_vec"}
    assert {n for n, k in found.items() if k == "text"} == {"episode_fts", "fact_fts", "note_fts", "message_fts"}
    left = set(db.table_names()) - set(found)
    derived = {n for n in left if n.endswith("_terms") or any(n.startswith(v + "_") for v in found if found[v] != "rows")}
    sqlite_own = {n for n in left if n.startswith("sqlite_")}  # sqlite_sequence: vec0's own counters
    assert left - derived - sqlite_own == {"meta", "schema_migrations"}


# -- one user only -----------------------------------------------------------------


def test_an_export_holds_one_user_and_restores_only_them(world):
    src = build(world, "two", user="ann")
    ok("ingest", write_jsonl(world / "bob.jsonl", chat(("zither", "quokka"), who=("Bob", "Cy"))), "--db", src, "--user", "bob")
    ok("export", "--db", src, "--user", "ann", "--out", world / "ann.jsonl")
    text = (world / "ann.jsonl").read_text(encoding="utf-8")
    assert "zither" not in text and "quokka" not in text and '"user_id":"bob"' not in text
    assert {r["row"]["user_id"] for r in lines(world / "ann.jsonl")[1:-1] if "user_id" in r["row"]} == {"ann"}

    ok("import-memory", world / "ann.jsonl", "--db", world / "ann.db")
    restored = json.dumps(dump(world / "ann.db"), default=str)
    assert "zither" not in restored and '"user_id": "bob"' not in restored and '"user_id": "ann"' in restored
    for args in (("inspect", "episodes", "--all"), ("inspect", "facts", "--all"), ("inspect", "messages"), ("inspect", "notes")):
        assert ok(*args, "--db", world / "ann.db", "--user", "ann") == ok(*args, "--db", src, "--user", "ann")
    assert ok("inspect", "messages", "--db", world / "ann.db", "--user", "bob").startswith("0 messages")


def test_exporting_a_user_with_nothing_stored_says_so(world):
    src = build(world, "src")
    run = nemori("export", "--db", src, "--user", "nobody")
    message = refused(run, 4)
    assert "nothing stored for user nobody" in message and "(users there: ann)" in message
    assert run.stdout == ""


# -- refusals write nothing ---------------------------------------------------------


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def exported(world) -> list[str]:
    """An export's lines as text, and the folder to restore into."""
    src = build(world, "src")
    ok("export", "--db", src, "--user", "ann", "--out", world / "ann.jsonl")
    return (world / "ann.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)


def _row_line(lines_: list[str], table: str) -> int:
    return next(i for i, line in enumerate(lines_) if json.loads(line).get("table") == table)


def _edit(lines_, index, change) -> list[str]:
    record = json.loads(lines_[index])
    change(record)
    return lines_[:index] + [json.dumps(record) + "\n"] + lines_[index + 1 :]


MALFORMED = {
    "empty": (lambda ls: [], "is empty, not a nemori export"),
    "no header": (lambda ls: ls[1:], ":1: not a nemori export"),
    "not JSON": (lambda ls: ls[:3] + ["{not json\n"] + ls[4:], ":4: not JSON"),
    "cut mid-line": (lambda ls: ls[:-3] + [ls[-3][: len(ls[-3]) // 2]], f":{0}: not JSON"),
    "cut between lines": (lambda ls: ls[:-1], "without the export's closing line: the file was cut short"),
    "a line missing": (
        lambda ls: ls[: _row_line(ls, "llm_calls")] + ls[_row_line(ls, "llm_calls") + 1 :],
        "lines are missing or were added",
    ),
    "a line after the end": (lambda ls: ls + [ls[1]], "a line after the export's closing line"),
    "format version 2": (lambda ls: _edit(ls, 0, lambda h: h.update(nemori_export=2)), ":1: export format 2; this nemori reads format 1"),
    "newer schema": (
        lambda ls: _edit(ls, 0, lambda h: h.update(schema=NEWEST + 1)),
        f":1: the export is of schema {NEWEST + 1}, newer than this nemori's {NEWEST}",
    ),
    "no such table": (lambda ls: _edit(ls, 2, lambda r: r.update(table="nope")), ":3: no table 'nope'"),
    "a derived table": (lambda ls: _edit(ls, 2, lambda r: r.update(table="episode_fts_data")), ":3: no table 'episode_fts_data'"),
    "no such column": (lambda ls: _edit(ls, 2, lambda r: r["row"].update(mood="x")), ":3: table episodes has no column 'mood'"),
    "another user's row": (
        lambda ls: _edit(ls, 2, lambda r: r["row"].update(user_id="bob")),
        ":3: a row of user 'bob' in an export of user 'ann'",
    ),
    "a dangling reference": (
        lambda ls: _edit(ls, _row_line(ls, "messages"), lambda r: r["row"].update(episode_id=999)),
        "this messages row refers to a row of episodes that is not in the export",
    ),
    "a duplicate id": (lambda ls: ls[:3] + ls[2:], ":4: episodes refused the row"),
    "a vector of the wrong width": (
        lambda ls: _edit(ls, _row_line(ls, "episode_vec"), lambda r: r["row"].update(embedding={"base64": "AAAAAA=="})),
        "episode_vec refused the row",
    ),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_export_is_refused_with_its_line_and_nothing_is_written(world, exported, case):
    make, expected = MALFORMED[case]
    bad = make(exported)
    if case == "cut mid-line":
        expected = f":{len(bad)}: not JSON"
    (world / "bad.jsonl").write_text("".join(bad), encoding="utf-8")
    (world / "empty.db").write_bytes(b"")
    before = _files(world)
    for target in (world / "new.db", world / "sub" / "dir" / "new.db", world / "empty.db"):
        run = nemori("import-memory", world / "bad.jsonl", "--db", target)
        assert expected in refused(run, 2), case
        assert _files(world) == before and not (world / "sub").exists()


def test_a_target_that_holds_memory_is_refused_and_unchanged(world, exported):
    for holder in (world / "src.db", build(world, "bobs", user="bob")):
        db = SqliteStore(holder)
        db.checkpoint()
        db.close()
        before = _files(world)
        run = nemori("import-memory", world / "ann.jsonl", "--db", holder)
        assert "already holds memory" in refused(run, 2)
        assert _files(world) == before


def test_an_existing_empty_database_takes_the_export(world, exported):
    target = world / "empty.db"
    SqliteStore(target).close()  # a nemori file with the schema and nothing in it
    ok("import-memory", world / "ann.jsonl", "--db", target)
    assert dump(target) == dump(world / "src.db")


def test_an_empty_database_bound_to_another_embedder_is_refused(world, exported):
    target = world / "other.db"
    db = SqliteStore(target)
    db.bind_embedder("other-model:32", 32)
    db.close()
    before = _files(world)
    run = nemori("import-memory", world / "ann.jsonl", "--db", target)
    assert "records embedder other-model:32, the export fake-bow:64" in refused(run, 2)
    assert _files(world) == before


def test_an_export_of_an_older_schema_is_upgraded_like_its_file_would_be(world, exported):
    """Schema 5 had no message index, no fact validity and no prediction records: the rows restore at 5, the migrations bring the file to today's schema."""
    later = {"message_fts", "episode_predictions"}  # tables added after schema 5
    fact_columns = {"episode_id", "valid_from", "valid_from_epoch", "valid_until", "valid_until_epoch"}  # schema 7

    def as_of_schema_5(line: str) -> str:
        record = json.loads(line)
        if record.get("table") == "facts":
            record["row"] = {k: v for k, v in record["row"].items() if k not in fact_columns}
        return json.dumps(record) + "\n"

    old = [as_of_schema_5(line) for line in exported if json.loads(line).get("table") not in later]
    old = _edit(old, 0, lambda h: h.update(schema=5))
    old = _edit(old, len(old) - 1, lambda end: [end["rows"].pop(t, None) for t in later])
    (world / "old.jsonl").write_text("".join(old), encoding="utf-8")
    said = ok("import-memory", world / "old.jsonl", "--db", world / "old.db")
    assert f"an export of schema 5, upgraded to {NEWEST}" in said
    restored, original = dump(world / "old.db"), dump(world / "src.db")
    assert restored["message_fts"] == [] and restored["messages"] == original["messages"]
    # the facts come back whole; their validity is the upgrade's backfill, from the episodes they came from
    strip = lambda rows: [{k: v for k, v in r.items() if k not in fact_columns} for r in rows]  # noqa: E731
    assert strip(restored["facts"]) == strip(original["facts"])
    assert [r["valid_from"] for r in restored["facts"]] == [r["valid_from"] for r in original["facts"]]
    db = SqliteStore(world / "old.db")
    assert db.schema_version() == NEWEST
    db.close()

    # What the export's schema did not have yet is refused, naming the line: schema 2 had no episode history columns.
    (world / "older.jsonl").write_text("".join(_edit(exported, 0, lambda h: h.update(schema=2))), encoding="utf-8")
    run = nemori("import-memory", world / "older.jsonl", "--db", world / "older.db")
    assert ":2: table episodes has no column 'superseded_by'" in refused(run, 2)
    assert not (world / "older.db").exists()


# -- the journal ---------------------------------------------------------------------


def test_the_markdown_journal_reads_as_a_diary(world):
    src = build(world, "src")
    said = ok("export", "--format", "markdown", "--db", src, "--user", "ann", "--out", world / "journal")
    assert "index.md and 2 months" in said
    files = {p.name: p.read_text(encoding="utf-8") for p in (world / "journal").iterdir()}
    assert set(files) == {"index.md", "2023-05.md", "2023-06.md"}  # June holds only the pending tail: its messages, as said
    june = files["2023-06.md"]
    assert "· messages not built into episodes yet\n\n- 09:00 **Ann**: Let us talk about the bakery again, point 0.\n" in june
    may = files["2023-05.md"]
    assert may.startswith("<!-- nemori journal") and "\n# May 2023\n" in may
    # The kayak day and the paddling two days later became one episode: one section, both days.
    assert "## Monday 8 May 2023, 10:00 – Wednesday 10 May 2023, 10:03 · Ann and Bob on the kayak" in may
    assert may.count("· Ann and Bob on the kayak") == 1 and "on the paddle" not in may
    assert (
        "## Tuesday 9 May 2023, 10:00–10:03 · Ann and Bob on the piano\n\nOn 9 May 2023: Ann and Bob talked about the piano, and Ann said she would come back to it."
        in may
    )
    assert "- Bob plays the piano every evening.\n" in may and "- Ann paddles her red kayak every week.\n" in may
    assert "- ~~Ann works as a nurse.~~ *(later, since 11 May 2023: Ann quit nursing and now works as a pilot.)*" in may
    assert may.index("on the kayak") < may.index("on the piano") < may.index("on the garden")
    assert not re.search(r"\b[EFN]\d+\b", may)  # no internal ids in the prose
    index = files["index.md"]
    assert "# The journal of ann" in index and "- [May 2023](2023-05.md): 3 episodes" in index
    assert "3 episodes from 8 May 2023 to 11 May 2023" in index
    assert "3 messages from " in index and "are not built into episodes yet" in index and "`nemori build` builds them" in index
    assert "- [June 2023](2023-06.md): 3 messages not built yet" in index
    assert re.search(r"- Ann quit nursing and now works as a pilot\. \(\[11 May 2023\]\(2023-05\.md#e\d+\)\)", index)
    assert "Ann works as a nurse." not in index  # what no longer holds is not "known now"
    for anchor in re.findall(r"2023-05\.md#(e\d+)", index):
        assert f'<a id="{anchor}"></a>' in may


def test_markdown_needs_a_folder_that_is_new_empty_or_a_journal(world):
    src = build(world, "src")
    run = nemori("export", "--format", "markdown", "--db", src, "--user", "ann")
    assert "--out DIR" in refused(run, 2)
    (world / "mine").mkdir()
    (world / "mine" / "letter.txt").write_text("mine", encoding="utf-8")
    run = nemori("export", "--format", "markdown", "--db", src, "--user", "ann", "--out", world / "mine")
    assert "holds other files" in refused(run, 2)
    ok("export", "--format", "markdown", "--db", src, "--user", "ann", "--out", world / "journal")
    ok("export", "--format", "markdown", "--db", src, "--user", "ann", "--out", world / "journal")  # over an earlier journal: fine


def test_an_amem_journal_lists_the_notes_by_day(world):
    src = build(world, "amem", "amem")
    ok("export", "--format", "markdown", "--db", src, "--user", "ann", "--out", world / "journal")
    may = (world / "journal" / "2023-05.md").read_text(encoding="utf-8")
    assert "## Monday 8 May 2023 · notes\n\n- 10:00 Ann: Let us talk about the kayak again, point 0. *(" in may
    assert "- 10:03 Bob: Let us talk about the kayak again, point 3. *(kayak)*\n" in may  # its tags, as the model gave them


def test_the_command_says_one_line_and_exits_2_without_a_traceback(world, exported):
    """Through app.main, as a user runs it: the refusal is one stderr line; nothing else is printed or written."""
    bad = world / "bad.jsonl"
    bad.write_text("".join(exported[:3] + ["{not json\n"] + exported[4:]), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEMORI_")}
    code = "import sys; from nemori_cli.cli.app import main; sys.argv = ['nemori', *sys.argv[1:]]; main()"
    run = subprocess.run(
        [sys.executable, "-c", code, "import-memory", str(bad), "--db", str(world / "new.db")],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines() == [
        f"nemori: error: {bad}:4: not JSON (Expecting property name enclosed in double quotes, column 2); nothing was imported"
    ]
    assert not (world / "new.db").exists()
