"""Memory as it stood at a date of the conversation (--as-of): facts valid then, episodes ended by then, filtered inside the indexes."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime

import apsw
import pytest

from nemori_cli import deps
from nemori_cli.dates import parse_as_of
from nemori_cli.domain import to_epoch
from nemori_cli.embed.fake import FakeEmbedder
from nemori_cli.errors import ConfigError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.llm.fake import FakeBackend
from nemori_cli.retrieval.answer import ask
from nemori_cli.retrieval.search import PROFILES, SearchOptions, search
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import message_index
from nemori_cli.store.migrations import MIGRATIONS
from nemori_cli.store.sqlite import SqliteStore
from tests.support.cli import run_nemori
from tests.unit.asof_world import BERLIN, JUNE, LISBON, MARCH, build
from tests.unit.fake_ingest import isolate, nemori

APRIL = datetime(2024, 4, 30, 23, 59, 59)
JULY = datetime(2024, 7, 1, 12, 0)
EVERYTHING = SearchOptions(k=5, facts=5, messages=20, turns=2, raw_for_top=0)


def facts_of(hits):
    return [h.text for h in hits if h.kind == "fact"]


# -- what as-of means -------------------------------------------------------------


def test_a_date_means_the_end_of_that_day_and_a_date_time_itself():
    assert parse_as_of("2024-04-30") == datetime(2024, 4, 30, 23, 59, 59, 999999)
    assert parse_as_of(" 2024-04-30T18:00 ") == datetime(2024, 4, 30, 18, 0)
    assert parse_as_of("2024-04-30T18:00+02:00").utcoffset().total_seconds() == 7200
    for bad in ("30/04/2024", "yesterday", "2024-13-01", ""):
        with pytest.raises(ConfigError, match="is not an ISO date or date-time"):
            parse_as_of(bad)


def test_facts_are_dated_in_the_conversations_time_not_the_ingests(db, llm, backend, embedder):
    build(db, llm, backend, embedder)
    lisbon, berlin = fact_sql.get(db, "u", 1), fact_sql.get(db, "u", 2)
    e1, e2 = episode_sql.get(db, "u", 1), episode_sql.get(db, "u", 2)
    assert (lisbon.text, lisbon.status, berlin.text) == (LISBON, "superseded", BERLIN)
    assert (lisbon.episode_id, berlin.episode_id) == (1, 2)
    assert lisbon.valid_from == e1.end == datetime(2024, 3, 5, 9, 3)  # known once its episode had ended
    assert lisbon.valid_until == berlin.valid_from == e2.end  # valid until its successor was known
    assert berlin.valid_until is None
    assert not lisbon.superseded_at.startswith("2024-06")  # that one is the ingest's clock


# -- search -----------------------------------------------------------------------


def test_before_the_move_search_finds_lisbon_and_after_it_berlin(db, llm, backend, embedder):
    build(db, llm, backend, embedder)
    before, _ = search(db, "u", embedder, "where does Ann live", replace(EVERYTHING, as_of=APRIL))
    assert facts_of(before) == [LISBON]
    assert {h.id for h in before if h.kind == "episode"} == {1}
    assert all(h.start < APRIL for h in before) and all(m.timestamp < APRIL for h in before for m in h.messages)
    after, _ = search(db, "u", embedder, "where does Ann live", replace(EVERYTHING, as_of=JULY))
    assert facts_of(after) == [BERLIN]
    assert {h.id for h in after if h.kind == "episode"} == {1, 2}
    now, _ = search(db, "u", embedder, "where does Ann live", EVERYTHING)
    assert facts_of(now) == [BERLIN]


def test_nothing_counts_before_its_episode_has_ended(db, llm, backend, embedder):
    build(db, llm, backend, embedder)
    midway = MARCH.replace(minute=1)  # two of E1's four messages said, E1 not over
    hits, _ = search(db, "u", embedder, "where does Ann live", replace(EVERYTHING, as_of=midway))
    assert {h.kind for h in hits} == {"message"}
    assert {m.timestamp for h in hits for m in h.messages} == {MARCH, midway}  # neighbours said later are left out too


def test_the_filter_is_inside_each_index_query_so_top_k_is_full(db, llm, backend, embedder):
    """k = 1 and the best match is from after the date: a post-filter would return nothing."""
    build(db, llm, backend, embedder)
    berlin = embedder.embed_query("Ann moved and lives in Berlin now again")
    assert [i for i, _ in episode_sql.vector_search(db, "u", berlin, 1)] == [2]
    assert [i for i, _ in episode_sql.vector_search(db, "u", berlin, 1, as_of=APRIL)] == [1]
    assert [i for i, _ in episode_sql.text_search(db, "u", "Ann moved again", 1, as_of=APRIL)] == [1]
    assert [i for i, _ in fact_sql.vector_search(db, "u", embedder.embed_query(BERLIN), 1, as_of=APRIL)] == [1]
    assert [i for i, _ in fact_sql.text_search(db, "u", "Ann lives Berlin", 1, as_of=APRIL)] == [1]
    said = [i for i, _ in message_index.vector_search(db, "u", berlin, 1, as_of=APRIL)]
    assert len(said) == 1 and said[0] <= 4  # one of March's four messages
    assert episode_sql.text_search(db, "u", "Berlin", 5, as_of=APRIL) == []


# -- ask --------------------------------------------------------------------------


def test_ask_as_of_answers_from_the_valid_view_and_that_day_is_today(db, llm, backend, embedder):
    build(db, llm, backend, embedder)
    answer, _ = ask(db, "u", embedder, llm, "Where does Ann live?", replace(PROFILES["budget"], k=3, as_of=APRIL))
    prompt = backend.prompts_for("Answer")[-1][-1]["content"]
    assert LISBON in prompt and "Berlin" not in prompt and "June" not in prompt
    assert "Today is 30 April 2024." in prompt
    assert answer.answer == "Lisbon" and all(h.start <= APRIL for h in answer.hits)
    ask(db, "u", embedder, llm, "Where does Ann live?", replace(PROFILES["budget"], k=3, as_of=JULY))
    later = backend.prompts_for("Answer")[-1][-1]["content"]
    assert BERLIN in later and LISBON not in later and "Today is 1 July 2024." in later


# -- the commands -----------------------------------------------------------------


@pytest.fixture
def moved(tmp_path, monkeypatch, llm, backend, embedder):
    """A database file of Ann's move, and every model the CLI builds a fake (the answer model's backends are kept)."""
    isolate(monkeypatch, tmp_path)
    path = tmp_path / "moved.db"
    db = SqliteStore(path)
    build(db, llm, backend, embedder)
    db.close()
    answering: list[FakeBackend] = []

    def build_llm(settings):
        answering.append(FakeBackend(default={"answer": "Lisbon"}))
        return StructuredLLM(answering[-1])

    monkeypatch.setattr(deps, "build_llm", build_llm)
    monkeypatch.setattr(deps, "build_answer_llm", lambda settings, memory_llm=None: build_llm(settings))

    def no_real_model(preset, settings):
        raise AssertionError(f"a unit test must not load {preset.name}")

    monkeypatch.setattr(deps, "build_backend", no_real_model)
    monkeypatch.setattr(deps, "build_embedder", lambda settings, db=None: FakeEmbedder())
    monkeypatch.setattr(deps, "check_embedder_files", lambda settings: None)
    return {"db": str(path), "answering": answering}


def _cli(moved, *args):
    run = nemori(*args, "--db", moved["db"], "--user", "u")
    assert run.exit_code == 0, (run.output, run.exception)
    return run.output


def test_search_and_inspect_facts_as_of_on_the_command_line(moved):
    shown = json.loads(_cli(moved, "search", "where does Ann live", "--as-of", "2024-04-30", "--json"))
    assert shown["as_of"] == "2024-04-30T23:59:59.999999"
    assert [h["text"] for h in shown["hits"] if h["kind"] == "fact"] == [LISBON]
    assert all(h["time"] < "2024-05" for h in shown["hits"])
    listed = json.loads(_cli(moved, "inspect", "facts", "--as-of", "2024-04-30", "--json"))
    assert [(f["text"], f["status"], f["valid_until"]) for f in listed["facts"]] == [(LISBON, "superseded", "2024-06-10T09:03:00")]
    listed = json.loads(_cli(moved, "inspect", "facts", "--as-of", "2024-06-10T09:03", "--json"))
    assert [f["text"] for f in listed["facts"]] == [BERLIN]  # the moment Berlin became known, Lisbon stopped
    text = _cli(moved, "inspect", "facts", "--as-of", "2024-04-30")
    assert LISBON in text and "(superseded since)" in text and "valid from 2024-03-05 09:03 until 2024-06-10 09:03" in text
    assert "Berlin" not in text and "1 facts for user u as of 2024-04-30 23:59" in text
    episodes = json.loads(_cli(moved, "inspect", "episodes", "--as-of", "2024-04-30", "--json"))
    assert [e["id"] for e in episodes["episodes"]] == [1]
    assert "memory as of 2024-07-01 00:00" in _cli(moved, "search", "where does Ann live", "--as-of", "2024-07-01T00:00")


def test_ask_as_of_on_the_command_line(moved):
    shown = json.loads(_cli(moved, "ask", "Where does Ann live?", "--as-of", "2024-04-30", "--k", "3", "--json"))
    assert shown["as_of"].startswith("2024-04-30") and shown["answer"] == "Lisbon"
    (prompt,) = moved["answering"][-1].prompts_for("Answer")
    # The core of that moment: the whole history then, which says Lisbon (its fact adds nothing to the turns shown).
    assert "Lisbon" in prompt[-1]["content"] and "Berlin" not in prompt[-1]["content"]
    assert "Today is 30 April 2024." in prompt[-1]["content"]
    shown = json.loads(_cli(moved, "ask", "Where does Ann live?", "--as-of", "2024-04-30", "--k", "3", "--profile", "budget", "--json"))
    (prompt,) = moved["answering"][-1].prompts_for("Answer")
    assert LISBON in prompt[-1]["content"] and "Berlin" not in prompt[-1]["content"]  # the budget road retrieves the fact


@pytest.mark.parametrize("command", [["search", "where"], ["ask", "where?"], ["inspect", "facts"], ["inspect", "episodes"]])
def test_a_bad_as_of_is_one_line_and_exit_2(moved, command):
    code, out, err = run_nemori([*command, "--as-of", "next tuesday", "--db", moved["db"]], {})
    assert code == 2 and out == "" and "Traceback" not in err
    assert err == "nemori: error: --as-of 'next tuesday' is not an ISO date or date-time (e.g. 2024-06-30 or 2024-06-30T18:00)\n"
    assert moved["answering"] == []  # refused before any model was built


# -- the migration ----------------------------------------------------------------


def _schema_6_file(path):
    """A file as schema 6 left it: Lisbon (E1, March) replaced by Berlin (E2, June); a merge; a duplicate; a fact without a source."""
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")
    for number, name, sql in MIGRATIONS[:6]:
        with conn:
            conn.execute(sql)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 'x')", (number, name))
    with conn:
        for start, end in ((MARCH, MARCH.replace(minute=3)), (JUNE, JUNE.replace(minute=3))):
            conn.execute(
                "INSERT INTO episodes(user_id, title, narrative, start_ts, end_ts, start_epoch, end_epoch, boundary, created_at)"
                " VALUES ('u', 't', 'n', ?, ?, ?, ?, 'model', 'x')",
                (start.isoformat(), end.isoformat(), to_epoch(start), to_epoch(end)),
            )
        rows = [  # id, text, status, superseded_by, origin, sources
            (1, LISBON, "superseded", 2, "new", (1,)),
            (2, BERLIN, "active", None, "conflict", (2,)),
            (3, "Ann has a flat.", "superseded", 4, "new", (1,)),
            (4, "Ann has a flat with a view.", "active", None, "merge", (1, 2)),  # made in June, carrying F3's source
            (5, "Ann likes tea.", "active", None, "new", (1, 2)),  # said again in June: a source added, still from March
            (6, "Ann is kind.", "active", None, "new", ()),
        ]
        for fact_id, text, status, successor, origin, sources in rows:
            conn.execute(
                "INSERT INTO facts(id, user_id, text, created_at, status, superseded_by, origin, superseded_at)"
                " VALUES (?, 'u', ?, '2025-01-01T00:00:00+00:00', ?, NULL, ?, ?)",
                (fact_id, text, status, origin, "2025-01-01T00:00:00+00:00" if successor else None),
            )
            conn.executemany("INSERT INTO fact_sources VALUES (?, ?)", [(fact_id, e) for e in sources])
        conn.execute("UPDATE facts SET superseded_by = 2 WHERE id = 1")
        conn.execute("UPDATE facts SET superseded_by = 4 WHERE id = 3")
    conn.close()


def test_the_migration_backfills_validity_from_the_source_episodes(tmp_path):
    path = tmp_path / "v6.db"
    _schema_6_file(path)
    db = SqliteStore(path, create=False)
    assert db.schema_version() == max(m[0] for m in MIGRATIONS)
    facts = {f.id: f for f in fact_sql.list_all(db, "u", include_superseded=True)}
    march, june = MARCH.replace(minute=3), JUNE.replace(minute=3)
    assert {i: (f.episode_id, f.valid_from, f.valid_until) for i, f in facts.items()} == {
        1: (1, march, june),
        2: (2, june, None),
        3: (1, march, june),
        4: (2, june, None),  # not its inherited March source
        5: (1, march, None),
        6: (None, None, None),  # nothing to date it by: in no as-of view
    }
    assert [f.id for f in fact_sql.list_all(db, "u", as_of=APRIL)] == [1, 3, 5]
    assert [f.id for f in fact_sql.list_all(db, "u", as_of=JULY)] == [2, 4, 5]
    assert [f.id for f in fact_sql.list_all(db, "u")] == [2, 4, 5, 6]  # without a date, nothing changes
    db.close()
