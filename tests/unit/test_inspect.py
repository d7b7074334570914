"""`nemori inspect ...`, `nemori stats` and their store reads, on a fake database."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from nemori_cli.embed.base import identity
from nemori_cli.errors import StoreError
from nemori_cli.memory import method, profile
from nemori_cli.store import messages as message_sql
from nemori_cli.store import notes as note_sql
from nemori_cli.store import stats, summaries
from nemori_cli.store.sqlite import SqliteStore
from tests.conftest import make_messages
from tests.support.memory_rows import add_episode, add_summary, fill_user, supersede


def _note(db, embedder, user, message, **attrs) -> int:
    """A note made from one stored message; caller holds the transaction."""
    return note_sql.add(
        db,
        user,
        content=message.content,
        ts=message.timestamp,
        keywords=["k"],
        tags=["t"],
        context="c",
        embedding=embedder.embed_documents([message.content])[0],
        message_id=message.id,
        **attrs,
    )


def _amem_user(db, embedder, user="u") -> list[int]:
    """Four messages, three of them noted; N1-N2 and N1-N3 linked; N3's arrival evolved N1."""
    with db.transaction():
        profile.record(db, method.resolve(db, {"memory": "amem"}))
        message_sql.insert_messages(db, user, make_messages(4, topic="amem"))
        msgs = message_sql.pending(db, user)
        ids = [_note(db, embedder, user, m) for m in msgs[:3]]
        note_sql.link(db, ids[0], ids[1], ids[1])
        note_sql.link(db, ids[0], ids[2], ids[2])
        first = note_sql.get(db, user, ids[0])
        note_sql.evolve(db, user, first, context="changed", tags=["t", "new"], made_by=ids[2], embedding=embedder.embed_documents(["x"])[0])
    return ids


# -- the store reads -------------------------------------------------------------


def test_counts_per_kind_in_the_order_shown(db, embedder):
    db.bind_embedder(identity(embedder), embedder.dimensions)
    fill_user(db, embedder, "alice", "Quux")
    with db.transaction():
        supersede(db, "episodes", 1, 2)
    assert stats.counts(db, "alice") == {
        "messages": 5,
        "pending": 1,
        "episodes": 1,
        "facts": 1,
        "merged_episodes": 1,
        "superseded_facts": 1,
        "notes": 0,
        "note_links": 0,
        "evolved_notes": 0,
    }
    assert set(stats.counts(db, "nobody").values()) == {0}


def test_counts_take_the_pending_count_they_are_given(db, embedder):
    db.bind_embedder(identity(embedder), embedder.dimensions)
    _amem_user(db, embedder)
    by_episode = stats.counts(db, "u")
    by_note = stats.counts(db, "u", pending=note_sql.count_unnoted)
    assert by_episode["pending"] == 4 and by_note["pending"] == 1  # no episodes at all; one message without a note
    assert {k: v for k, v in by_note.items() if k != "pending"} == {k: v for k, v in by_episode.items() if k != "pending"}
    assert (by_note["notes"], by_note["note_links"], by_note["evolved_notes"]) == (3, 2, 1)
    assert list(by_note) == list(by_episode)  # the same keys in the same order either way


def test_summary_history_is_the_users_versions_oldest_first(db, embedder):
    db.bind_embedder(identity(embedder), embedder.dimensions)
    with db.transaction():
        e = add_episode(db, embedder, "alice", "t", "n", "sum")
        first = add_summary(db, "alice", "one", e)
        add_summary(db, "bob", "bob's", e)
        second = add_summary(db, "alice", "two", e)
    rows = summaries.history(db, "alice")
    assert [(r["id"], r["text"], r["episode_id"]) for r in rows] == [(first, "one", e), (second, "two", e)]
    assert set(rows[0]) == {"id", "text", "episode_id", "created_at"}
    assert summaries.history(db, "nobody") == []


# -- the commands ----------------------------------------------------------------


@pytest.fixture
def cli(monkeypatch):
    for key in [k for k in os.environ if k.startswith("NEMORI_")]:
        monkeypatch.delenv(key)
    from nemori_cli.cli.app import app

    def invoke(*args: str):
        return CliRunner().invoke(app, list(args))

    return invoke


@pytest.fixture
def native_file(tmp_path, embedder):
    path = tmp_path / "native.db"
    db = SqliteStore(path)
    db.bind_embedder(identity(embedder), embedder.dimensions)
    fill_user(db, embedder, "alice", "Quux")
    with db.transaction():
        supersede(db, "episodes", 1, 2)
    db.close()
    return str(path)


@pytest.fixture
def amem_file(tmp_path, embedder):
    path = tmp_path / "amem.db"
    db = SqliteStore(path)
    db.bind_embedder(identity(embedder), embedder.dimensions)
    _amem_user(db, embedder)
    db.close()
    return str(path)


@pytest.mark.parametrize("kind", ["episode", "fact", "note"])
def test_showing_a_missing_item_names_it(cli, native_file, kind):
    run = cli("inspect", kind, "99", "--db", native_file, "--user", "alice")
    assert isinstance(run.exception, StoreError) and run.exception.message == f"no {kind} 99 for user alice"
    assert run.exception.exit_code == 2  # an id the memory does not hold is bad input, as docs/REFERENCE.md's exit-code table says


def test_show_an_episode_with_its_merged_part(cli, native_file):
    shown = json.loads(cli("inspect", "episode", "2", "--db", native_file, "--user", "alice", "--json").output)
    assert shown["id"] == 2 and [p["id"] for p in shown["merged_from"]] == [1] and list(shown)[-1] == "merged_from"
    text = cli("inspect", "episode", "2", "--db", native_file, "--user", "alice").output.splitlines()
    assert text[0].startswith("E2: Quux concert") and text[1].startswith("merged from E1 ")


def test_show_a_fact_with_its_sources_and_what_it_replaced(cli, native_file):
    shown = json.loads(cli("inspect", "fact", "2", "--db", native_file, "--user", "alice", "--json").output)
    assert [e["id"] for e in shown["sources"]] == [1, 2] and [r["id"] for r in shown["replaced"]] == [1]
    assert list(shown)[-2:] == ["sources", "replaced"]
    text = cli("inspect", "fact", "2", "--db", native_file, "--user", "alice").output
    assert "  replaced F1: alice likes Quux tea" in text and "  from E2 " in text


def test_show_a_note_with_links_history_and_what_it_evolved(cli, amem_file):
    first = json.loads(cli("inspect", "note", "1", "--db", amem_file, "--user", "u", "--json").output)
    assert [n["id"] for n in first["linked"]] == [2, 3] and [c["field"] for c in first["history"]] == ["context", "tags"]
    assert first["evolved"] == []
    third = json.loads(cli("inspect", "note", "3", "--db", amem_file, "--user", "u", "--json").output)
    assert [c["note_id"] for c in third["evolved"]] == [1, 1]
    text = cli("inspect", "note", "3", "--db", amem_file, "--user", "u").output
    assert "  [dim]" not in text and "its arrival changed N1's context" in text


def test_summary_shows_the_latest_version_or_all(cli, tmp_path, embedder):
    path = tmp_path / "s.db"
    db = SqliteStore(path)
    db.bind_embedder(identity(embedder), embedder.dimensions)
    with db.transaction():
        e = add_episode(db, embedder, "alice", "t", "n", "sum")
        add_summary(db, "alice", "one", e)
        add_summary(db, "alice", "two", e)
    db.close()
    latest = json.loads(cli("inspect", "summary", "--db", str(path), "--user", "alice", "--json").output)
    assert [s["text"] for s in latest["summaries"]] == ["two"]
    every = json.loads(cli("inspect", "summary", "--history", "--db", str(path), "--user", "alice", "--json").output)
    assert [s["text"] for s in every["summaries"]] == ["one", "two"]
    assert cli("inspect", "summary", "--db", str(path), "--user", "bob").output == "no summary (it is kept only with --memory summary)\n"


def test_stats_counts_pending_by_how_the_memory_is_built(cli, native_file, amem_file):
    native = json.loads(cli("stats", "--db", native_file, "--user", "alice", "--json").output)
    assert native["counts"]["pending"] == 1 and native["counts"]["merged_episodes"] == 1 and native["profile"] is None
    amem = json.loads(cli("stats", "--db", amem_file, "--user", "u", "--json").output)
    assert amem["profile"] == "--memory amem" and amem["counts"]["pending"] == 1  # waiting for a note, not an episode
    assert list(amem["counts"]) == list(native["counts"])
    text = cli("stats", "--db", amem_file, "--user", "u").output
    assert "4 messages (1 not built yet), 0 episodes, 0 facts, 3 notes" in text and "method: --memory amem" in text


# -- forget's report -------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "item", "letter"),
    [("episode", "2", "E"), ("fact", "2", "F")],
)
def test_forgetting_one_item_reports_it_as_json_or_one_line(cli, tmp_path, embedder, kind, item, letter):
    for json_out in (True, False):
        path = tmp_path / f"{kind}{json_out}.db"
        db = SqliteStore(path)
        db.bind_embedder(identity(embedder), embedder.dimensions)
        fill_user(db, embedder, "alice", "Quux")
        db.close()
        run = cli("forget", kind, item, "--db", str(path), "--user", "alice", *(["--json"] if json_out else []))
        assert run.exit_code == 0, run.output
        if json_out:
            out = json.loads(run.output)
            assert list(out) == ["user", kind, "counts"] and out["user"] == "alice" and out[kind] == int(item)
        else:
            assert run.output.startswith(f"forgot {letter}{item} of user alice: ") and run.output.count("\n") == 1


def test_forgetting_a_note_and_a_user_report_the_same_way(cli, amem_file, tmp_path, embedder):
    note = cli("forget", "note", "2", "--db", amem_file, "--user", "u")
    assert note.exit_code == 0, note.output
    assert note.output.startswith("forgot N2 of user u: notes: 1")
    whole = json.loads(cli("forget", "user", "u", "--yes", "--json", "--db", amem_file).output)
    assert list(whole) == ["user", "counts"] and whole["user"] == "u" and whole["counts"]["notes"] == 2
    path = tmp_path / "whole.db"
    db = SqliteStore(path)
    db.bind_embedder(identity(embedder), embedder.dimensions)
    fill_user(db, embedder, "alice", "Quux")
    db.close()
    text = cli("forget", "user", "alice", "--yes", "--db", str(path)).output
    assert text.startswith("forgot user alice: ") and "messages: 5" in text


def test_progress_off_a_terminal_is_lines_as_the_work_goes():
    from nemori_cli.cli.progress import LINE_EVERY_S, line_progress

    lines: list[str] = []
    t = [0.0]
    update = line_progress("episodes", write=lines.append, clock=lambda: t[0])
    update(0, 40)
    t[0] = 1.0
    update(5, 40)  # too soon after the last line: not written
    t[0] = LINE_EVERY_S + 1
    update(10, 40)
    t[0] = LINE_EVERY_S + 2
    update(40, 40)  # the end is always written
    assert lines == [
        "episodes: 0/40 (0%), 0:00:00 elapsed\n",
        "episodes: 10/40 (25%), 0:00:11 elapsed, eta 0:00:33\n",
        "episodes: 40/40 (100%), 0:00:12 elapsed\n",
    ]


def test_times_show_the_offset_the_input_gave(monkeypatch, tmp_path):
    from tests.unit.fake_ingest import isolate, nemori, use_fakes, write_jsonl

    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    rows = [
        {"id": "a", "speaker": "Ann", "content": "kayak at dawn", "timestamp": "2024-03-04T07:00:00+02:00"},
        {"id": "b", "speaker": "Bob", "content": "kayak at noon", "timestamp": "2024-03-04T12:00:00Z"},
        {"id": "c", "speaker": "Ann", "content": "kayak, no zone", "timestamp": "2024-03-04T13:00:00"},
    ]
    db = tmp_path / "m.db"
    assert nemori("ingest", write_jsonl(tmp_path / "c.jsonl", rows), "--db", db).exit_code == 0
    shown = nemori("inspect", "messages", "--db", db).stdout
    assert "2024-03-04 07:00 +02:00" in shown and "2024-03-04 12:00 UTC" in shown
    assert "2024-03-04 13:00 Ann" in " ".join(shown.split())  # naive: no zone invented
