"""The Python API under misuse (issue 35): wrong types, two Memory objects on one file, use after forget("user"), two threads."""

from __future__ import annotations

import threading

import pytest

from nemori_cli.api import Memory
from nemori_cli.errors import NemoriError
from tests.unit.fake_ingest import conversation, isolate, use_fake_answers, use_fakes


@pytest.fixture
def world(tmp_path, monkeypatch):
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    use_fake_answers(monkeypatch)
    return tmp_path / "m.db"


def _rows(n_topics=2):
    return [{k: r[k] for k in ("speaker", "content", "timestamp", "id")} for r in conversation()[: 4 * n_topics]]


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.ingest("not a list"),
        lambda m: m.ingest([{"speaker": 1, "content": None}]),
        lambda m: m.ingest([42]),
        lambda m: m.search(""),
        lambda m: m.search(None),
        lambda m: m.ask(["a", "list"]),
        lambda m: m.forget("episode", "1"),
        lambda m: m.forget("episode", True),
        lambda m: m.forget("everything"),
        lambda m: m.facts(as_of="not a date"),
        lambda m: m.episodes(as_of=12),
    ],
)
def test_a_wrong_type_is_one_nemori_error_and_writes_nothing(world, call):
    with Memory(world) as memory:
        memory.ingest(_rows(1))
        before = memory.stats()
        with pytest.raises(NemoriError):
            call(memory)
        assert memory.stats() == before


def test_two_memory_objects_on_one_file_see_each_others_writes(world):
    with Memory(world, user="ann") as one, Memory(world, user="ann") as two:
        one.ingest(_rows(1))
        assert two.stats()["messages"] == 4 and two.search("kayak")
        two.ingest(_rows(2))
        assert one.stats()["messages"] == 8 == two.stats()["messages"]
        assert one.stats()["episodes"] == two.stats()["episodes"] >= 2


def test_use_after_forgetting_the_user_starts_from_nothing(world):
    with Memory(world, user="ann") as memory:
        memory.ingest(_rows(2))
        memory.forget("user")
        assert memory.stats()["messages"] == 0 and memory.search("kayak") == []
        assert memory.ask("What about the kayak?").abstained
        memory.ingest(_rows(1))
        assert memory.stats()["messages"] == 4


def test_one_memory_used_from_two_threads(world):
    with Memory(world, user="ann") as memory:
        memory.ingest(_rows(2))
        errors: list[BaseException] = []

        def reader():
            try:
                for _ in range(15):
                    assert memory.search("kayak")
                    memory.episodes()
            except BaseException as e:  # collected: the assertion below names it
                errors.append(e)

        threads = [threading.Thread(target=reader) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert errors == [] and not any(t.is_alive() for t in threads)
