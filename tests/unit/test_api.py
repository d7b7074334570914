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
        (
            [{"speaker": "Ann", "content": "hi", "timestamp": "2024-01-01"}, {"speaker": "", "content": "x", "timestamp": "2024-01-01"}],
            "<messages>:2: 'speaker' is empty",
        ),
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
    with Memory(path) as memory, pytest.raises(InputError) as caught:
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


# -- what the CLI stands on: exports, flush and pending, timings, citations --

EXPORTS = __import__("pathlib").Path(__file__).parents[1] / "fixtures" / "exports"


def test_an_export_read_by_read_export_is_ingested_under_its_format_and_again_adds_nothing(world):
    from nemori_cli import Memory
    from nemori_cli.api import read_export

    tmp_path, _ = world
    imported = read_export(EXPORTS / "chatgpt_conversations.json")
    assert imported.format == "chatgpt" and imported.namespace.startswith("chatgpt")
    assert imported.messages and imported.left_out  # the fixture holds system and hidden messages
    seen: list[tuple[str, ...]] = []
    with Memory(tmp_path / "m.db") as memory:
        first = memory.ingest(imported, on_stored=seen.append)
        assert first.added == len(imported.messages) and first.pending == 0 and first.episodes >= 1
        assert seen == [()]  # called once, before the episodes, with no changed ids
        again = memory.ingest(read_export(EXPORTS / "chatgpt_conversations.json"))
        assert (again.added, again.episodes) == (0, 0)
    # the CLI reading the same file adds nothing either: one id namespace for both
    result = nemori("ingest", EXPORTS / "chatgpt_conversations.json", "--db", tmp_path / "m.db", "--json")
    assert result.exit_code == 0 and '"added": 0' in result.output


def test_read_export_selects_and_refuses_as_the_cli_does(world):
    from nemori_cli.api import read_export

    tmp_path, _ = world
    everything = read_export(EXPORTS / "chatgpt_conversations.json")
    one = everything.messages[0].session
    chosen = read_export(EXPORTS / "chatgpt_conversations.json", conversations=[one])
    assert chosen.messages and {m.session for m in chosen.messages} == {one}
    with pytest.raises(ConfigError, match="since '2024-02-01' is after until"):
        read_export(EXPORTS / "chatgpt_conversations.json", since="2024-02-01", until="2024-01-01")
    with pytest.raises(ConfigError, match="not one of"):
        read_export(EXPORTS / "chatgpt_conversations.json", format="myspace")
    with pytest.raises(InputError, match="no such file"):
        read_export(tmp_path / "missing.json")
    with pytest.raises(InputError, match="is a directory"):
        read_export(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"speaker": "Ann"}\n')
    with pytest.raises(InputError, match="bad.jsonl:1"):
        read_export(bad)


def test_ingest_without_flush_leaves_pending_and_flush_finishes_it(world):
    from nemori_cli import Memory

    tmp_path, _ = world
    with Memory(tmp_path / "m.db") as memory:
        kept = memory.ingest(conversation(), flush=False)
        assert kept.pending > 0 and memory.pending() == kept.pending
        done: list[tuple[int, int]] = []
        flushed = memory.flush(progress=lambda d, t: done.append((d, t)))
        assert flushed.pending == 0 and memory.pending() == 0 and flushed.episodes >= 1
        assert done and done[-1][0] == done[-1][1]
        nothing = memory.flush()
        assert (nothing.episodes, nothing.pending) == (0, 0)
    with pytest.raises(StoreError):
        Memory(tmp_path / "none.db").flush()  # flushing never creates a database
    assert not (tmp_path / "none.db").exists()
    with pytest.raises(ConfigError, match="positive"):
        Memory(tmp_path / "m.db").flush(max_tokens=0)


def test_retrieve_says_how_long_and_as_of_when(world):
    from nemori_cli import Memory

    tmp_path, _ = world
    with Memory(tmp_path / "m.db") as memory:
        memory.ingest(conversation())
        found = memory.retrieve("kayak", as_of="2023-05-09", k=5, budget=0)
        assert found.query == "kayak" and found.ms > 0 and found.hits
        assert found.as_of == datetime(2023, 5, 9, 23, 59, 59, 999999) or found.as_of.date().isoformat() == "2023-05-09"
        assert [h.id for h in found.hits] == [h.id for h in memory.search("kayak", as_of="2023-05-09", k=5, budget=0)]


def test_an_answer_names_its_model_and_its_cited_episodes(world):
    from nemori_cli import Memory

    tmp_path, _ = world
    with Memory(tmp_path / "m.db") as memory:
        memory.ingest(conversation())
        reply = memory.ask("What did Ann and Bob talk about first?", today="2023-06-01")
        assert reply.model and reply.problem == ""
        cited = memory.cited(reply)
        assert [e.id for e in cited] == [i for i in reply.cited if i in {e.id for e in memory.episodes()}]


def test_a_failed_answer_says_why(world, monkeypatch):
    from nemori_cli import Memory, deps
    from nemori_cli.llm.base import StructuredLLM
    from nemori_cli.llm.fake import FakeBackend

    tmp_path, _ = world
    with Memory(tmp_path / "m.db") as memory:
        memory.ingest(conversation())
    # an answer model that never writes JSON: every attempt fails, the answer falls back
    monkeypatch.setattr(deps, "build_answer_llm", lambda settings, memory_llm=None: StructuredLLM(FakeBackend(default="not json at all")))
    with Memory(tmp_path / "m.db") as memory:
        reply = memory.ask("What did Ann and Bob talk about first?")
        assert reply.failed and reply.problem and "\n" not in reply.problem


def test_method_flags_are_recorded_from_the_constructor(world):
    from nemori_cli import Memory
    from nemori_cli.memory.profile import stored

    tmp_path, _ = world
    with Memory(tmp_path / "m.db", facts=False, integrate=False) as memory:
        memory.ingest(conversation(per_topic=2))
        profile = stored(memory._session("read").db)
        assert profile.facts is False and profile.integrate is False
        assert memory.facts() == []
    with pytest.raises(ConfigError, match="neighbours"):
        Memory(tmp_path / "m.db", neighbours=0)


def test_ctrl_c_while_the_model_loads_leaves_no_database_file(world, monkeypatch):
    from nemori_cli import deps

    tmp_path, _ = world

    def interrupted(settings):
        raise KeyboardInterrupt

    monkeypatch.setattr(deps, "build_llm", interrupted)
    source = write_jsonl(tmp_path / "c.jsonl", conversation(per_topic=2))
    result = nemori("ingest", source, "--db", tmp_path / "new.db")
    assert result.exit_code != 0
    assert not (tmp_path / "new.db").exists()


def test_ask_names_a_missing_database_before_probing_any_endpoint(world, monkeypatch):
    from nemori_cli import Memory, deps

    tmp_path, _ = world
    probed = []
    monkeypatch.setattr(deps.Session, "check_answer_endpoint", lambda self: probed.append(1))
    with pytest.raises(StoreError):
        Memory(tmp_path / "missing.db").ask("Where?")
    assert probed == [] and not (tmp_path / "missing.db").exists()


def test_pending_of_a_memory_that_never_opened_its_file_is_zero_and_creates_nothing(world):
    from nemori_cli import Memory

    tmp_path, _ = world
    memory = Memory(tmp_path / "new.db")
    memory._session("create")  # as ingest opens it, before the model loads
    assert memory.pending() == 0 and not (tmp_path / "new.db").exists()


def test_an_amem_memory_answers_from_its_notes_not_from_a_core_of_raw_turns(world):
    """A-MEM's memory is its notes: `ask` retrieves them (the budget road), and no core state is prepared for it."""
    from nemori_cli import Memory

    tmp_path, asked = world
    with Memory(tmp_path / "amem.db", memory="amem") as memory:
        assert memory.ingest(conversation(per_topic=2)).notes == 8
        prepared, core = memory.prepare_core()
        assert (prepared.outcome, core) == ("none", None)
        reply = memory.ask("What did Ann and Bob say about the kayak?", today="2023-06-01")
        assert reply.answer == "the kayak"
        assert {h.kind for h in reply.hits} == {"note"}
        prompt = asked[-1].history[-1][0][-1]["content"]
        assert "The whole conversation" not in prompt  # no core of raw turns


def test_beyond_the_window_the_short_road_prepares_no_core_and_answers_from_a_short_context(world, monkeypatch):
    """Issue 41: a history longer than the core holds is answered from what the question finds, with no core read."""
    from nemori_cli import Memory
    from nemori_cli.retrieval import core_answer

    tmp_path, asked = world
    small = core_answer.CoreBudget(40, beyond="short")  # 40 tokens: the 8 messages do not fit
    monkeypatch.setattr(core_answer, "budget_for", lambda window, *tail, beyond=None: small)
    with Memory(tmp_path / "m.db") as memory:
        memory.ingest(conversation(per_topic=2))
        prepared, core = memory.prepare_core()
        assert prepared.outcome == "none" and core is not None and not core.holds_everything
        memory.ask("What did Ann and Bob say about the kayak?", today="2023-06-01")
        assert memory.last_core is None  # nothing was prepared for the answer either
        prompt = asked[-1].history[-1][0][-1]["content"]
        assert "The whole conversation" not in prompt and "kayak" in prompt
    roomy = core_answer.CoreBudget(4000, beyond="short")  # where it fits, the core as before
    monkeypatch.setattr(core_answer, "budget_for", lambda window, *tail, beyond=None: roomy)
    with Memory(tmp_path / "m.db") as memory:
        _prepared, core = memory.prepare_core()  # a fake model keeps no KV state: "none" here whatever the road
        assert core.holds_everything
        memory.ask("What did Ann and Bob say about the kayak?", today="2023-06-01")
        assert "The whole conversation" in asked[-1].history[-1][0][-1]["content"]


def test_asking_for_facts_by_number_asks_for_them_beyond_the_window_too():
    """`Memory.ask(facts=N)`: N facts, read on the short road as well (retrieval/core_answer.py reads facts_beyond)."""
    from nemori_cli.services.answer import search_options

    assert not search_options("core", None, {}).facts_beyond
    assert search_options("core", None, {"facts": 5}).facts_beyond
    assert not search_options("core", None, {"facts": 0}).facts_beyond
    assert not search_options("core", None, {"facts": 5, "facts_beyond": False}).facts_beyond


def test_ask_facts_on_the_command_line_asks_for_them_beyond_the_window_too():
    from nemori_cli.cli.query import Profile, RetrievalArgs

    assert not RetrievalArgs(Profile.core).options().facts_beyond
    assert RetrievalArgs(Profile.core, facts=5).options().facts_beyond
    assert not RetrievalArgs(Profile.core, facts=0).options().facts_beyond


def test_the_instructions_head_is_held_for_a_past_moment_and_for_the_budget_road(world, monkeypatch):
    """Every timeline prompt opens with the same instructions: `ask --as-of` beyond the window and `--profile budget`
    hold them from their saved state as the short road does, and their prompts begin with them."""
    from nemori_cli import Memory
    from nemori_cli.prompts import answer as answer_prompt
    from nemori_cli.retrieval import core_answer
    from nemori_cli.retrieval.core_cache import CoreCache, Head

    tmp_path, asked = world
    held: list = []
    real = CoreCache.prepare
    monkeypatch.setattr(CoreCache, "prepare", lambda self, llm, user, prefix: held.append(prefix) or real(self, llm, user, prefix))
    small = core_answer.CoreBudget(40, beyond="short")  # 40 tokens: the 8 messages do not fit
    monkeypatch.setattr(core_answer, "budget_for", lambda window, *tail, beyond=None: small)
    with Memory(tmp_path / "m.db") as memory:
        memory.ingest(conversation(per_topic=2))
        for how in ({"as_of": "2023-06-01"}, {"profile": "budget"}):
            held.clear()
            memory.ask("What did Ann and Bob say about the kayak?", **how)
            assert [type(p) for p in held] == [Head] and held[0].prefix == answer_prompt.timeline_head(), how
            prompt = asked[-1].history[-1][0]
            assert prompt[0] == held[0].prefix[0] and prompt[1]["content"].startswith(held[0].prefix[1]["content"]), how
