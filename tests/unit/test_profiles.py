"""The method a database is built with: recorded, inherited, never mixed; and each ablation's effect."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from nemori_cli.errors import ConfigError
from nemori_cli.memory import method
from nemori_cli.memory import profile as profiles
from nemori_cli.memory.profile import Profile
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.prompts import distill as distill_prompt
from nemori_cli.retrieval.answer import ask
from nemori_cli.retrieval.search import SearchOptions, search
from nemori_cli.store import facts as fact_sql
from tests.unit.fakeworld import World, chat

DAY = datetime(2023, 5, 8, 10, 0)
WORDS = ["Ann", "sailing", "boat", "Malta", "regatta"]


def build(db, llm, backend, embedder, profile, facts=(("Ann owns a sailing boat.",), ("Ann sailed to Malta.",))):
    world = World(backend, Summary=lambda m, s: {"summary": "Ann sails. " + str(len(m[-1]["content"]))})
    world.facts = [list(f) for f in facts]
    pipe = Pipeline(db, "u", llm, embedder, profile=profile)
    pipe.add_messages(chat(WORDS, start=DAY) + chat(WORDS, start=DAY + timedelta(days=20), tag="zebra"))
    pipe.process(flush=True)
    return world


def test_the_first_run_records_the_profile_and_later_runs_inherit_it(db):
    assert profiles.stored(db) is None
    chosen = method.resolve(db, {"memory": "naive-rag", "integrate": False})
    with db.transaction():
        profiles.record(db, chosen)
    assert method.resolve(db, {}) == chosen == Profile(memory="naive-rag", facts=True, integrate=False)
    assert method.resolve(db, {"memory": "naive-rag"}) == chosen  # repeating a flag is fine


def test_mixing_methods_is_refused_with_both_named(db):
    with db.transaction():
        profiles.record(db, method.resolve(db, {}))
    with pytest.raises(ConfigError) as e:
        method.resolve(db, {"distill": "direct"})
    assert "--distill prediction" in e.value.message and "--distill direct" in e.value.message


def test_summary_mode_cannot_also_keep_facts(db):
    assert method.resolve(db, {"memory": "summary"}).facts is False
    with pytest.raises(ConfigError):
        method.resolve(db, {"memory": "summary", "facts": True})


def test_summary_mode_keeps_versions_and_no_facts_and_retrieval_shows_it(db, llm, backend, embedder):
    build(db, llm, backend, embedder, Profile(memory="summary", facts=False))
    assert backend.prompts_for("Distilled") == [] and fact_sql.count(db, "u") == 0
    versions = db.query("SELECT text, episode_id FROM summaries WHERE user_id = 'u' ORDER BY id")
    assert [v["episode_id"] for v in versions] == [1, 2]
    assert "Ann sails." in backend.prompts_for("Summary")[1][-1]["content"]  # the old summary is rewritten, not lost
    hits, _ = search(db, "u", embedder, "sailing", SearchOptions())
    assert [h.kind for h in hits][-1] == "summary" and hits[-1].text == versions[-1]["text"]
    backend.responses = [{"answer": "sails", "sources": [1]}]
    ask(db, "u", embedder, llm, "What does Ann do?")
    assert "Summary of everything so far:" in backend.history[-1][0][-1]["content"]


def test_direct_distillation_never_predicts(db, llm, backend, embedder):
    build(
        db, llm, backend, embedder, Profile(facts=True, distill="direct", integrate=False), facts=(("Ann sailing boat Malta regatta.",), ())
    )
    assert backend.prompts_for("Prediction") == []
    assert all(p[0]["content"] == distill_prompt.DIRECT_SYSTEM for p in backend.prompts_for("Distilled"))


def test_prediction_distillation_predicts_when_something_is_evoked(db, llm, backend, embedder):
    build(db, llm, backend, embedder, Profile(facts=True, integrate=False), facts=(("Ann sailing boat Malta regatta.",), ()))
    assert len(backend.prompts_for("Prediction")) == 1


def test_index_on_messages_puts_the_raw_words_in_the_full_text_index(db, llm, backend, embedder):
    build(db, llm, backend, embedder, Profile(facts=False, index="messages", integrate=False))
    indexed = db.one("SELECT narrative FROM episode_fts WHERE rowid = 2")["narrative"]
    assert indexed.startswith("Ann: ") and "zebra" in indexed
    stored = db.one("SELECT narrative FROM episodes WHERE id = 2")["narrative"]
    assert stored.startswith("On 8 May 2023")  # the row keeps its narrative


def test_retrieval_switches_drop_episodes_or_facts_and_context_brings_raw_messages(db, llm, backend, embedder):
    build(db, llm, backend, embedder, Profile(facts=True, integrate=False))
    hits, _ = search(db, "u", embedder, "sailing Malta", SearchOptions(k=0))
    assert hits and {h.kind for h in hits} == {"fact"}
    hits, _ = search(db, "u", embedder, "sailing Malta", SearchOptions(facts=0))
    assert {h.kind for h in hits} == {"episode"}
    hits, _ = search(db, "u", embedder, "sailing Malta", SearchOptions(facts=0, raw_for_top=0, context="messages"))
    assert all(h.messages for h in hits)
    backend.responses = [{"answer": "yes", "sources": []}]
    ask(db, "u", embedder, llm, "Did Ann sail?", SearchOptions(facts=0, raw_for_top=0, context="messages"))
    prompt = backend.history[-1][0][-1]["content"]
    assert "Ann and Bob said:" not in prompt and "Ann: Ann sailing boat Malta regatta zebra" in prompt


def test_the_cli_offers_exactly_the_memory_modes():
    """--memory's choices are the names domain.py declares (for an instant --help), and each is one mode's, in order."""
    import typing

    from nemori_cli.cli.ingest import MemoryOpt
    from nemori_cli.memory import modes

    choices = typing.get_args(typing.get_args(typing.get_args(MemoryOpt)[0])[0])
    assert choices == modes.NAMES == tuple(m.name for m in modes.ALL)


def test_the_api_and_the_memory_help_name_exactly_the_memory_modes():
    """A new mode is named in api.MemoryName (domain.py's) and in --memory's help too."""
    import typing

    from nemori_cli.api import MemoryName
    from nemori_cli.cli.ingest import MemoryOpt
    from nemori_cli.memory import modes

    assert typing.get_args(MemoryName) == modes.NAMES
    help_text = typing.get_args(MemoryOpt)[1].help
    assert all(name in help_text for name in modes.NAMES), help_text


def test_a_new_database_takes_the_presets_partition_and_keeps_it(db):
    import json

    assert method.resolve(db, {}, new={"partition": "similarity"}).partition == "similarity"
    assert method.resolve(db, {"partition": "model"}, new={"partition": "similarity"}).partition == "model"  # a flag wins
    chosen = method.resolve(db, {}, new={"partition": "similarity"})
    with db.transaction():
        profiles.record(db, chosen)
    # Later runs inherit it, whatever the model now prefers; a flag that disagrees is refused.
    assert method.resolve(db, {}, new={"partition": "model"}).partition == "similarity"
    with pytest.raises(ConfigError, match="--partition similarity.*--partition model"):
        method.resolve(db, {"partition": "model"})
    # A database recorded before the choice existed was cut by the model, and stays so.
    with db.transaction():
        old = {k: v for k, v in json.loads(db.get_meta(profiles.META_KEY)).items() if k != "partition"}
        db.set_meta(profiles.META_KEY, json.dumps(old))
    assert method.resolve(db, {}, new={"partition": "similarity"}).partition == "model"


def test_an_unknown_partition_is_refused(db):
    with pytest.raises(ConfigError, match="--partition 'topics': expected one of model, similarity"):
        method.resolve(db, {"partition": "topics"})


@pytest.mark.parametrize("how", ["model", "similarity"])
def test_partition_by_similarity_runs_no_partition_call(db, llm, backend, embedder, how):
    World(backend)
    pipe = Pipeline(db, "u", llm, embedder, profile=Profile(facts=False, partition=how))
    pipe.add_messages(chat(WORDS, start=DAY, n=15))  # one stretch of 15 messages: long enough to cut
    pipe.process(flush=True)
    stages = [r["stage"] for r in db.query("SELECT stage FROM llm_calls")]
    assert ("partition" in stages) == (how == "model")
    assert "narration" in stages
    kinds = {r["boundary"] for r in db.query("SELECT boundary FROM episodes")}
    assert kinds <= ({"start", "model", "fallback", "size"} if how == "model" else {"start", "similarity"})
