"""Why a fact exists: each episode's prediction and what it missed, kept with the facts and shown by `inspect fact`."""

from __future__ import annotations

import json

import apsw
import pytest

from nemori_cli.errors import ModelError
from nemori_cli.memory import consolidate
from nemori_cli.memory.profile import Profile
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import forget
from nemori_cli.store import predictions as prediction_sql
from nemori_cli.store.migrations import MIGRATIONS
from nemori_cli.store.sqlite import SqliteStore
from tests.support.old_files import old_file
from tests.unit.asof_world import BERLIN, LISBON, PREDICTED, build
from tests.unit.fake_ingest import isolate, nemori


def test_each_episode_keeps_what_was_predicted_and_what_it_missed(db, llm, backend, embedder):
    build(db, llm, backend, embedder)
    first, second = prediction_sql.get(db, "u", 1), prediction_sql.get(db, "u", 2)
    assert (first.method, first.predicted, first.evoked, first.missed) == ("nothing-evoked", None, (), (LISBON,))
    assert (second.method, second.predicted, second.evoked, second.missed) == ("predicted", PREDICTED, (LISBON,), (BERLIN,))
    # The prediction the record names is the one the distillation was given.
    (predicted,) = [p for p in backend.prompts_for("Distilled") if PREDICTED in p[-1]["content"]]
    assert "Ann moved and lives in Berlin now" in predicted[-1]["content"]


def test_the_record_and_the_facts_are_one_unit_of_work(db, llm, backend, embedder, monkeypatch):
    """A failure after the record is written rolls it back with the episode: never a record without its facts, or facts without it."""

    def fail(*args, **kwargs):
        raise ModelError("the endpoint went away")

    monkeypatch.setattr(consolidate, "apply", fail)
    with pytest.raises(ModelError):
        build(db, llm, backend, embedder)
    assert db.query("SELECT * FROM episode_predictions") == [] and fact_sql.count(db, "u") == 0


def test_direct_distillation_records_that_nothing_was_predicted(db, llm, backend, embedder):
    build(db, llm, backend, embedder, profile=Profile(facts=True, integrate=False, distill="direct"))
    assert backend.prompts_for("Prediction") == []
    record = prediction_sql.get(db, "u", 2)
    assert (record.method, record.predicted, record.evoked, record.missed) == ("direct", None, (), (BERLIN,))


def test_forgetting_a_fact_blanks_the_records_that_could_tell_it(db, llm, backend, embedder):
    build(db, llm, backend, embedder)
    with db.transaction():
        forget.forget_fact(db, "u", 2)  # Berlin, and the Lisbon fact it replaced
    rows = db.query("SELECT episode_id, method, predicted, evoked, missed FROM episode_predictions ORDER BY episode_id")
    assert rows == [{"episode_id": e, "method": "forgotten", "predicted": None, "evoked": "[]", "missed": None} for e in (1, 2)]


# -- inspect fact ------------------------------------------------------------------


@pytest.fixture
def moved(tmp_path, monkeypatch, llm, backend, embedder):
    isolate(monkeypatch, tmp_path)
    path = tmp_path / "moved.db"
    db = SqliteStore(path)
    build(db, llm, backend, embedder)
    db.close()
    return str(path)


def _inspect(path, *args):
    run = nemori("inspect", "fact", *args, "--db", path, "--user", "u")
    assert run.exit_code == 0, (run.output, run.exception)
    return run.output


def test_inspect_fact_shows_its_episode_the_prediction_and_what_it_missed(moved):
    text = _inspect(moved, "2")
    lines = [line.rstrip() for line in text.splitlines()]
    assert lines[0].startswith("F2 (active, conflict, created ") and lines[0].endswith(BERLIN)
    assert "  valid from 2024-06-10 09:03, still valid (conversation time)" in lines
    assert "  replaced F1: Ann lives in Lisbon." in lines
    assert "Distilled from E2 (2024-06-10 09:00 – 2024-06-10 09:03): Ann moved and lives in Berlin now again" in lines
    assert any(line.startswith("  On 8 May 2023 Ann and Bob said: Ann moved") for line in lines)  # its narrative
    assert "Predicted from 1 known fact:" in lines and f"  known: {LISBON}" in lines and f"  {PREDICTED}" in lines
    missed = lines.index("Missed by the prediction (what the distillation found in the messages that the prediction did not say):")
    assert lines[missed + 1] == f"  - {BERLIN}"


def test_inspect_fact_json_says_the_same(moved):
    shown = json.loads(_inspect(moved, "2", "--json"))
    assert (shown["episode_id"], shown["valid_from"], shown["valid_until"]) == (2, "2024-06-10T09:03:00", None)
    assert shown["episode"]["id"] == 2 and shown["episode"]["narrative"].startswith("On 8 May 2023")
    assert shown["prediction"] == {
        "recorded": True,
        "method": "predicted",
        "note": None,
        "predicted": PREDICTED,
        "evoked": [LISBON],
        "missed": [BERLIN],
        "dropped": [],
        "created_at": shown["prediction"]["created_at"],
    }
    older = json.loads(_inspect(moved, "1", "--json"))
    assert (older["status"], older["valid_until"]) == ("superseded", "2024-06-10T09:03:00")
    assert older["prediction"]["method"] == "nothing-evoked" and "memory knew nothing related yet" in older["prediction"]["note"]


def test_inspect_a_superseded_fact_with_nothing_predicted(moved):
    lines = [line.rstrip() for line in _inspect(moved, "1").splitlines()]
    assert "  valid from 2024-03-05 09:03 until 2024-06-10 09:03 (conversation time)" in lines
    assert "Prediction: no prediction: memory knew nothing related yet, so everything new in the messages was kept" in lines
    found = lines.index("Found in the messages (nothing was predicted, so all of it counted as new):")
    assert lines[found + 1] == f"  - {LISBON}"


def test_inspect_a_direct_fact_says_there_was_no_prediction(tmp_path, monkeypatch, llm, backend, embedder):
    isolate(monkeypatch, tmp_path)
    path = tmp_path / "direct.db"
    db = SqliteStore(path)
    build(db, llm, backend, embedder, profile=Profile(facts=True, integrate=False, distill="direct"))
    db.close()
    text = _inspect(str(path), "2")
    assert "Prediction: no prediction: built with --distill direct, which extracts facts from the raw episode without predicting it" in text
    assert json.loads(_inspect(str(path), "2", "--json"))["prediction"]["method"] == "direct"


def test_a_fact_from_before_the_record_says_so(tmp_path, monkeypatch):
    isolate(monkeypatch, tmp_path)
    path = tmp_path / "v6.db"
    old_file(path, 6)  # a fact from episode 1 (2024-01-01 10:00-11:00), made before schema 7
    SqliteStore(path, create=False).close()
    shown = json.loads(_inspect(str(path), "1", "--json"))
    assert shown["prediction"] == {"recorded": False, "note": "not recorded (made before schema 7)"}
    assert (shown["episode_id"], shown["valid_from"]) == (1, "2024-01-01T11:00:00")  # backfilled from its episode
    text = _inspect(str(path), "1")
    assert "Prediction: not recorded (made before schema 7)" in text and "Distilled from E1 " in text
    assert prediction_sql.SCHEMA == 7 and max(m[0] for m in MIGRATIONS) >= 7
    conn = apsw.Connection(str(path))
    assert conn.execute("SELECT count(*) FROM episode_predictions").fetchall() == [(0,)]
    conn.close()
