"""`ask` for a user with no memory: answered at once, with no model loaded and no trace left in the store (issue 35, 3 and 6)."""

from __future__ import annotations

from nemori_cli import deps
from nemori_cli.store.sqlite import SqliteStore
from tests.support.schemas import check
from tests.unit.fake_ingest import conversation, isolate, nemori, use_fake_answers, use_fakes, write_jsonl


def _rows(db) -> dict[str, int]:
    store = SqliteStore(db, create=False)
    try:
        return {t: store.scalar(f"SELECT count(*) AS n FROM {t}") for t in ("stage_events", "llm_calls", "messages", "episodes")}
    finally:
        store.close()


def test_asking_for_a_made_up_user_abstains_loads_nothing_and_writes_nothing(tmp_path, monkeypatch):
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    db = tmp_path / "m.db"
    assert nemori("ingest", write_jsonl(tmp_path / "c.jsonl", conversation()), "--db", db, "--user", "alice").exit_code == 0
    answers = use_fake_answers(monkeypatch)
    loaded: list[str] = []
    monkeypatch.setattr(deps, "build_embedder", lambda settings, db=None: loaded.append("embedder"))  # must not be called
    before = _rows(db)
    result = nemori("ask", "What did alice buy?", "--db", db, "--user", "nobody", "--json")
    assert result.exit_code == 0, result.output
    reply = check("ask", result)  # the documented JSON shape, as for any answer
    assert reply["abstained"] is True and reply["answer"] == "Not mentioned in my memories."
    assert answers == [] and loaded == []  # no answer model, no embedder
    assert _rows(db) == before  # no stage_events, no llm_calls under the made-up name (nor anyone's)


def test_a_user_with_memory_still_gets_the_model(tmp_path, monkeypatch):
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    db = tmp_path / "m.db"
    assert nemori("ingest", write_jsonl(tmp_path / "c.jsonl", conversation()), "--db", db, "--user", "alice").exit_code == 0
    answers = use_fake_answers(monkeypatch)
    result = nemori("ask", "What about the kayak?", "--db", db, "--user", "alice", "--json")
    assert result.exit_code == 0, result.output
    assert answers  # the answer model was built for a user who has a memory
