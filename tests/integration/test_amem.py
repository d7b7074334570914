"""A-MEM mode with the real stack: the tiny GGUF, MiniLM, a real file, the `nemori` command.

The tiny model's decisions are poor; these tests hold what must be true
whatever it answers: one note per message, links that name existing notes
both ways across processes, an index that matches the rows, and forgetting
that leaves nothing pointing at a deleted note.
"""

from __future__ import annotations

import numpy as np
import pytest

from nemori_cli.store import notes as note_sql
from nemori_cli.store.sqlite import SqliteStore
from tests.integration.conftest import REPO, run_json, run_nemori

pytestmark = pytest.mark.integration

DATA = REPO / "tests" / "data"


def _links_are_sound(store: SqliteStore) -> None:
    notes = {r["id"] for r in store.query("SELECT id FROM notes")}
    pairs = {(r["note_id"], r["linked_id"]) for r in store.query("SELECT note_id, linked_id FROM note_links")}
    assert all(a in notes and b in notes for a, b in pairs), "a link names a note that does not exist"
    assert all((b, a) in pairs for a, b in pairs), "links are stored both ways"
    assert store.query("PRAGMA foreign_key_check") == []


def test_amem_ingest_inspect_ask_and_forget(tmp_path):
    db = str(tmp_path / "amem.db")
    source = str(DATA / "paris_berlin.jsonl")
    report = run_json("ingest", source, "--db", db, "--user", "lea", "--memory", "amem")
    assert report["notes"] == report["added"] == 8 and report["episodes"] == 0 and report["pending"] == 0
    again = run_json("ingest", source, "--db", db, "--user", "lea")  # the recorded method, nothing new
    assert again["added"] == 0 and again["notes"] == 0

    listed = run_json("inspect", "notes", "--db", db, "--user", "lea")["notes"]
    assert len(listed) == 8 and all(n["message_id"] for n in listed)
    assert all(n["context"] and n["origin"] in ("model", "fallback") for n in listed)
    store = SqliteStore(tmp_path / "amem.db", create=False)
    _links_are_sound(store)
    stats = run_json("stats", "--db", db, "--user", "lea")
    assert stats["counts"]["notes"] == 8 and stats["counts"]["pending"] == 0 and "--memory amem" in stats["profile"]

    answer = run_json("ask", "Where does Lea live now?", "--db", db, "--user", "lea")
    kinds = {m["kind"] for m in answer["memories"]}
    assert kinds == {"note"}, kinds

    linked = [n for n in listed if n["links"]]
    target = (linked or listed)[0]
    shown = run_json("inspect", "note", str(target["id"]), "--db", db, "--user", "lea")
    assert [n["id"] for n in shown["linked"]] == target["links"]
    forgotten = run_json("forget", "note", str(target["id"]), "--db", db, "--user", "lea")
    assert forgotten["counts"]["notes"] == 1 and forgotten["counts"]["messages"] == 1
    store = SqliteStore(tmp_path / "amem.db", create=False)
    _links_are_sound(store)
    assert store.query("SELECT 1 FROM note_links WHERE note_id = ? OR linked_id = ?", (target["id"], target["id"])) == []
    assert store.query("SELECT 1 FROM note_evolutions WHERE note_id = ? OR made_by = ?", (target["id"], target["id"])) == []
    for index in ("note_fts", "note_vec"):
        assert store.query(f"SELECT rowid FROM {index} WHERE rowid = ?", (target["id"],)) == []
    assert run_json("flush", "--db", db, "--user", "lea")["notes"] == 0  # its message went too: nothing to remember again
    missing = run_nemori("inspect", "note", str(target["id"]), "--db", db, "--user", "lea")
    assert missing.returncode != 0 and b"no note" in missing.stderr


def test_evolved_notes_are_indexed_as_they_read_now(tmp_path):
    db = tmp_path / "ev.db"
    run_json("ingest", str(REPO / "examples" / "chat.jsonl"), "--db", str(db), "--memory", "amem")
    store = SqliteStore(db, create=False)
    from nemori_cli import deps
    from nemori_cli.cli import options

    embedder = deps.build_embedder(options.settings(str(db), None), store)
    notes = note_sql.list_all(store, "default")
    assert len(notes) == 30
    _links_are_sound(store)
    for note in notes:  # evolved or not, the vector says what the row says
        expected = embedder.embed_documents([note_sql.embedding_text(note.content, note.keywords, note.tags, note.context)])[0]
        row = store.one(
            "SELECT vec_distance_cosine(embedding, ?) AS d FROM note_vec WHERE rowid = ?",
            (np.asarray(expected, np.float32).tobytes(), note.id),
        )
        assert row["d"] < 1e-4, (note.id, row["d"])
    history = store.query("SELECT note_id, made_by, field, after FROM note_evolutions")
    for change in history:
        note = note_sql.get(store, "default", change["note_id"])
        assert change["made_by"] > change["note_id"]  # evolution is made by a later note, to an earlier one
        if change["field"] == "context" and change == history[-1]:
            assert note.context == change["after"]


def test_nemori_plus_amem_turns_distilled_facts_into_notes(tmp_path):
    db = tmp_path / "na.db"
    report = run_json("ingest", str(DATA / "paris_berlin.jsonl"), "--db", str(db), "--memory", "nemori+amem")
    store = SqliteStore(db, create=False)
    notes = note_sql.list_all(store, "default")
    assert report["notes"] == len(notes) == report["facts"]
    assert store.one("SELECT count(*) AS n FROM facts")["n"] == 0
    episodes = {r["id"] for r in store.query("SELECT id FROM episodes")}
    assert all(n.episode_id in episodes and n.message_id is None for n in notes)
    _links_are_sound(store)
