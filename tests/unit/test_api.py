"""The Python API (`from nemori_cli import Memory`) on a real SQLite file, with the fake LLM and embedder."""

from __future__ import annotations

from datetime import datetime

import pytest

from nemori_cli.errors import ConfigError, InputError, StoreError
from tests.unit.fake_ingest import conversation, isolate, nemori, use_fake_answers, use_fakes, write_jsonl


@pytest.fixture()
def world(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    return tmp_path, use_fake_answers(monkeypatch)


def test_memory_is_importable_from_the_package_without_loading_it_first():
    import nemori_cli

    assert nemori_cli.Memory.__name__ == "Memory"
    with pytest.raises(AttributeError):
        nemori_cli.NoSuchThing  # noqa: B018


def test_ingest_then_read_back_episodes_and_search(world):
    from nemori_cli import Memory

    tmp_path, _ = world
    with Memory(tmp_path / "m.db", user="ann") as memory:
        result = memory.ingest(conversation())
        assert (result.read, result.added, result.changed, result.pending) == (16, 16, 0, 0)
        assert result.episodes == 4
        episodes = memory.episodes()
        assert [e.title for e in episodes] == [f"Ann and Bob on {t}" for t in ("kayak", "piano", "garden", "chess")]
        assert all(e.user == "ann" for e in episodes)
        with_messages = memory.episodes(with_messages=True)
        assert sum(len(e.messages) for e in with_messages) == 16
        assert memory.episode(episodes[0].id).messages[0].content == "Let us talk about the kayak again, point 0."
        hits = memory.search("kayak", k=5, messages=0, budget=0)
        assert hits and hits[0].kind == "episode" and "kayak" in hits[0].title
        assert memory.stats()["messages"] == 16


def test_ingest_is_idempotent_and_reports_changed_text(world):
    from nemori_cli import Memory

    tmp_path, _ = world
    rows = conversation(per_topic=2)
    with Memory(tmp_path / "m.db") as memory:
        memory.ingest(rows)
        again = memory.ingest(rows)
        assert (again.added, again.changed, again.episodes) == (0, 0, 0)
        edited = [dict(rows[0], content="Something else entirely.")]
        assert memory.ingest(edited).changed == 1
        assert memory.episode(memory.episodes()[0].id).messages[0].content == rows[0]["content"]


def test_the_api_and_the_cli_see_one_memory(world):
    from nemori_cli import Memory

    tmp_path, _ = world
    db = tmp_path / "m.db"
    assert nemori("ingest", write_jsonl(tmp_path / "c.jsonl", conversation()), "--db", db, "--user", "ann").exit_code == 0
    with Memory(db, user="ann") as memory:
        assert len(memory.episodes()) == 4
    with Memory(db, user="bob") as other:
        assert other.episodes() == [] and other.search("kayak") == []


def test_datetime_and_incoming_messages_are_accepted(world):
    from nemori_cli import Memory
    from nemori_cli.domain import IncomingMessage

    tmp_path, _ = world
    with Memory(tmp_path / "m.db") as memory:
        result = memory.ingest(
            [
                {"role": "Ann", "text": "the kayak trip", "timestamp": datetime(2024, 6, 1, 9, 0), "id": 1},
                IncomingMessage(speaker="Bob", content="kayak again", timestamp=datetime(2024, 6, 1, 9, 1), source_id="2"),
            ]
        )
        assert result.added == 2
        stored = memory.episode(memory.episodes()[0].id).messages
        assert [(m.speaker, m.timestamp) for m in stored] == [("Ann", datetime(2024, 6, 1, 9, 0)), ("Bob", datetime(2024, 6, 1, 9, 1))]


@pytest.mark.parametrize(
    ("messages", "said"),
    [
        ([{"speaker": "Ann", "content": "hi"}], "<messages>:1: no 'timestamp'"),
        ([{"speaker": "Ann", "content": "hi", "timestamp": "2024-01-01"}, {"speaker": "", "content": "x", "timestamp": "2024-01-01"}], "<messages>:2: 'speaker' is empty"),
        (["not a mapping"], "<messages>:1: a str, not a mapping"),
        ({"speaker": "Ann"}, "expected a list of messages"),
        ([], "no messages"),
        ([{"speaker": "Ann", "content": "\ud800", "timestamp": "2024-01-01"}], "lone surrogate"),
    ],
)
def test_bad_messages_are_refused_before_anything_is_written(world, messages, said):
    from nemori_cli import Memory

    tmp_path, _ = world
    path = tmp_path / "m.db"
    with Memory(path) as memory:
        with pytest.raises(InputError) as caught:
            memory.ingest(messages)
    assert said in caught.value.message
    assert not path.exists()  # not even an empty database


def test_reads_of_a_missing_database_fail_without_creating_it(world):
    from nemori_cli import Memory

    tmp_path, _ = world
    path = tmp_path / "none.db"
    with pytest.raises(StoreError):
        Memory(path).episodes()
    with pytest.raises(StoreError):
        Memory(path).forget("fact", 1)
    assert not path.exists()


def test_ask_answers_from_memory_and_counts_its_cost(world):
    from nemori_cli import Memory

    tmp_path, asked = world
    with Memory(tmp_path / "m.db") as memory:
        memory.ingest(conversation())
        reply = memory.ask("What did Ann and Bob talk about first?", today="2023-06-01")
        assert reply.answer == "the kayak"
        assert not reply.failed
        prompt = asked[-1].history[-1][0][-1]["content"]
        assert "Today is 1 June 2023" in prompt
        assert any("kayak" in h.text for h in reply.hits)


def test_forget_one_episode_and_the_whole_user(world):
    from nemori_cli import Memory

    tmp_path, _ = world
    with Memory(tmp_path / "m.db", user="ann") as memory:
        memory.ingest(conversation())
        first = memory.episodes()[0]
        counts = memory.forget("episode", first.id)
        assert counts["episodes"] >= 1 and counts["messages"] == 4
        assert first.id not in [e.id for e in memory.episodes()]
        with pytest.raises(StoreError):
            memory.forget("episode", first.id)
        memory.forget("user")
        assert memory.episodes() == [] and memory.stats().get("messages", 0) == 0


@pytest.mark.parametrize(("kind", "item"), [("user", 3), ("fact", None), ("fact", "3"), ("everything", 1)])
def test_forget_refuses_what_it_cannot_mean(world, kind, item):
    from nemori_cli import Memory

    tmp_path, _ = world
    with pytest.raises(ConfigError):
        Memory(tmp_path / "m.db").forget(kind, item)


def test_settings_are_checked_when_the_memory_is_made(world):
    from nemori_cli import Memory

    tmp_path, _ = world
    with pytest.raises(ConfigError):
        Memory(tmp_path / "m.db", user="")
    with pytest.raises(ConfigError):
        Memory(tmp_path / "m.db", window=1)
    with Memory(tmp_path / "m.db") as memory:
        memory.ingest(conversation(per_topic=2))
        with pytest.raises(ConfigError, match="unknown search option"):
            memory.search("kayak", nonsense=3)
        with pytest.raises(ConfigError, match="profile"):
            memory.search("kayak", profile="fast")
        with pytest.raises(InputError):
            memory.search("   ")


def test_a_method_is_chosen_once(world):
    from nemori_cli import Memory

    tmp_path, _ = world
    Memory(tmp_path / "m.db", memory="summary").ingest(conversation(per_topic=2))
    with pytest.raises(ConfigError, match="Mixing methods"):
        Memory(tmp_path / "m.db", memory="native").ingest(conversation(per_topic=2))


def test_as_of_reads_memory_as_it_stood(world):
    from nemori_cli import Memory

    tmp_path, asked = world
    with Memory(tmp_path / "m.db") as memory:
        memory.ingest(conversation())  # one topic a day from 8 May 2023: kayak, piano, garden, chess
        assert [e.title for e in memory.episodes(as_of="2023-05-09")] == ["Ann and Bob on kayak", "Ann and Bob on piano"]
        assert memory.episodes(as_of=datetime(2023, 5, 1)) == []
        hits = memory.search("chess", as_of="2023-05-09", k=5, messages=5, budget=0)
        assert hits and not any("chess" in h.text for h in hits)
        memory.ask("What about the kayak?", as_of="2023-05-09")
        assert "Today is 9 May 2023" in asked[-1].history[-1][0][-1]["content"]
        with pytest.raises(ConfigError, match="--as-of"):
            memory.search("kayak", as_of="last week")
