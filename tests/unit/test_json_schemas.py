"""Every `--json` output against its JSON Schema in docs/schemas/, on real SQLite files built with the fake LLM and embedder.

The schemas close their objects (additionalProperties false) wherever the
output is fixed, so a field added to a command without its schema fails
here; the command walk below fails for a new --json command without one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from nemori_cli import deps
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.llm.fake import FakeBackend
from tests.support.schemas import REGISTRY, SCHEMAS, check, schema_files
from tests.unit.fake_ingest import TOPICS, conversation, isolate, nemori, use_fakes, write_jsonl

BASE = "https://nemori-cli.invalid/schemas/v1/"
DEFS = "defs.schema.json"

# The schema (docs/schemas/NAME.schema.json) of each command's --json output, by command path.
OUTPUTS = {
    "ingest": ("ingest", "ingest-dry-run"),
    "flush": ("flush",),
    "build": ("build",),
    "search": ("search",),
    "ask": ("ask",),
    "inspect episodes": ("inspect-episodes",),
    "inspect episode": ("inspect-episode",),
    "inspect facts": ("inspect-facts",),
    "inspect fact": ("inspect-fact",),
    "inspect notes": ("inspect-notes",),
    "inspect note": ("inspect-note",),
    "inspect summary": ("inspect-summary",),
    "inspect messages": ("inspect-messages",),
    "stats": ("stats",),
    "models": ("models",),
    "models install": ("models-install",),
    "doctor": ("doctor",),
    "forget": ("forget-scrub",),
    "forget user": ("forget-user",),
    "forget episode": ("forget-episode",),
    "forget fact": ("forget-fact",),
    "forget note": ("forget-note",),
    "bench locomo": ("bench-report",),
    "bench longmemeval": ("bench-report",),
    "bench judge": ("bench-report",),
    "bench report": ("bench-report",),
    "bench systems": ("bench-systems",),
}


# -- the schema files ------------------------------------------------------------


def _properties(node, where=""):
    """(where, schema) of every property a schema declares (not those an "if" only tests)."""
    if isinstance(node, dict):
        for name, sub in (node.get("properties") or {}).items():
            yield f"{where}/{name}", sub
        for key, sub in node.items():
            if key != "if":
                yield from _properties(sub, f"{where}/{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from _properties(sub, f"{where}/{i}")


@pytest.mark.parametrize("name", sorted(schema_files()))
def test_every_schema_file_is_a_valid_draft_2020_12_schema_with_a_versioned_id(name):
    schema = schema_files()[name]
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == BASE + name
    assert schema.get("title") and schema.get("description")
    # A property describes itself, or refers to a definition that does.
    undescribed = [where for where, sub in _properties(schema) if not sub.get("description") and "$ref" not in sub]
    assert undescribed == [], f"{name}: properties without a description"


def test_every_reference_resolves():
    for schema in schema_files().values():
        resolver = REGISTRY.resolver(base_uri=schema["$id"])
        for node in _nodes(schema):
            if isinstance(node, dict) and isinstance(node.get("$ref"), str):
                resolver.lookup(node["$ref"])  # raises on a dangling reference


def _nodes(node):
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        yield from _nodes(child)


def _json_commands() -> set[str]:
    """The path of every command and group of the app that takes --json."""
    import typer

    from nemori_cli.cli.app import app

    found = set()

    def walk(command, path):
        if any("--json" in getattr(p, "opts", ()) for p in command.params):
            found.add(" ".join(path))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def test_every_command_with_a_json_flag_has_a_schema_and_every_schema_a_command():
    commands = _json_commands()
    assert "inspect episodes" in commands and "forget" in commands  # the walk sees subcommands and group options
    assert sorted(commands - set(OUTPUTS)) == [], "a command prints --json without a schema in docs/schemas/ (add it, and to OUTPUTS)"
    assert sorted(set(OUTPUTS) - commands) == []
    named = {f"{n}.schema.json" for names in OUTPUTS.values() for n in names}
    assert sorted(named - set(schema_files())) == []
    assert sorted(set(schema_files()) - named - {DEFS}) == [], "a schema that no command's output uses"


def test_the_readme_lists_every_schema():
    readme = (SCHEMAS / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\(([\w-]+\.schema\.json)\)", readme))
    assert listed == set(schema_files())


def _errors(name: str, data) -> list[str]:
    return [e.message for e in Draft202012Validator(schema_files()[f"{name}.schema.json"], registry=REGISTRY).iter_errors(data)]


def test_the_schemas_refuse_what_no_command_prints():
    message = {
        "id": 1,
        "source_id": None,
        "session": None,
        "speaker": "Ann",
        "content": "hi",
        "timestamp": "2023-05-08T10:00:00",
        "episode_id": None,
    }
    listed = {"user": "u", "messages": [message]}
    assert _errors("inspect-messages", listed) == []
    assert _errors("inspect-messages", {**listed, "extra": 1})  # a field added without its schema
    assert _errors("inspect-messages", {"user": "u", "messages": [{**message, "extra": 1}]})
    assert _errors("inspect-messages", {"user": "u", "messages": [{k: v for k, v in message.items() if k != "speaker"}]})
    hit = {
        "kind": "episode",
        "id": 1,
        "score": 0.5,
        "similarity": None,
        "vector_rank": 1,
        "text_rank": None,
        "time": "2023-05-08T10:00:00",
        "end": "2023-05-08T10:05:00",
        "title": "t",
        "text": "x",
        "messages": [message],
    }
    found = {"query": "q", "user": "u", "hits": [hit], "tokens": {"prompt": 0, "completion": 0}, "ms": 1.0}
    assert _errors("search", found) == []
    assert _errors("search", {**found, "hits": [{**hit, "kind": "note"}]})  # a note has context and linked_from
    assert _errors("search", {**found, "hits": [{**hit, "context": "c", "linked_from": None}]})  # and only a note
    assert _errors("search", {**found, "hits": [{**hit, "kind": "note", "context": "c", "linked_from": None}]}) == []
    episode = {
        "id": 1,
        "title": "t",
        "narrative": "n",
        "start": "s",
        "end": "e",
        "boundary": "model",
        "status": "active",
        "superseded_by": None,
        "superseded_reason": None,
        "created_at": "c",
        "message_count": 1,
        "message_ids": ["m"],
    }
    shown = {**episode, "messages": [message], "merged_from": [episode]}
    assert _errors("inspect-episode", shown) == []
    assert _errors("inspect-episode", {**shown, "extra": 1})
    assert _errors("inspect-episode", {**shown, "merged_from": [{**episode, "messages": []}]})  # parts come without messages
    fact = {
        "id": 1,
        "text": "t",
        "status": "active",
        "created_at": "c",
        "source_episode_ids": [1],
        "origin": "new",
        "superseded_by": None,
        "superseded_reason": None,
        "superseded_at": None,
    }
    assert _errors("inspect-fact", {**fact, "sources": [episode], "replaced": [], "provenance": {"added": "later"}}) == []  # open
    assert _errors("inspect-fact", {**fact, "sources": [episode]})


# -- worlds ------------------------------------------------------------------------


def _topic(prompt: str) -> str:
    return next((t for t in TOPICS if t in prompt), "talk")


def native_answer(messages, schema) -> dict:
    """The fake model: garden continues piano (a merge), and chess makes the kayak fact outdated (a supersession).

    The self-checks get their known answers, so integration and consolidation stay on.
    """
    title = schema.get("title")
    prompt = "\n".join(m["content"] for m in messages)
    if title == "Partition":
        return {"boundaries": []}
    if title in ("Narrative", "MergedEpisode"):
        topic = _topic(prompt)
        return {"title": f"Ann and Bob on {topic}", "narrative": f"On 8 May 2023 Ann and Bob talked about the {topic}."}
    if title == "Continuation":
        earlier, _, new = prompt.partition("NEW episode:")
        return {"same_event": "Lisbon hotel" in prompt or ("piano" in earlier and "garden" in new)}
    if title == "Prediction":
        return {"prediction": "Ann and Bob talked."}
    if title == "Distilled":
        if "chess" in prompt:
            return {"facts": ["Ann no longer paddles her kayak; she plays chess."]}
        return {"facts": [f"Ann paddles her {_topic(prompt)}."]}
    if title == "Outdated":
        newer = prompt.partition("NEWER fact:")[2]
        return {"outdated": "pilot" in newer or "no longer" in newer}
    if title == "Summary":
        return {"summary": f"Ann and Bob talked about the {_topic(prompt)}."}
    if title == "Answer":
        return {"answer": "The kayak.", "sources": []}
    if title == "NoteAttributes":
        return {"keywords": ["Ann", _topic(prompt)], "context": f"Ann talks about the {_topic(prompt)}.", "tags": [_topic(prompt)]}
    if title == "LinkDecision":
        offered = [int(line[1:].split("]", 1)[0]) for line in prompt.split("Nearby memories:\n", 1)[1].splitlines() if line.startswith("[")]
        return {
            "links": offered[:1],
            "updates": [{"id": i, "context": "Ann talks about her hobbies again.", "tags": ["hobbies"]} for i in offered[:1]],
        }
    raise AssertionError(f"unscripted {title}")


@pytest.fixture
def world(monkeypatch, tmp_path) -> Path:
    """Fakes for every model (the answer model too) and no settings of this machine."""
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)  # the embedder; the models are replaced below
    monkeypatch.setattr(deps, "build_llm", lambda settings: StructuredLLM(FakeBackend(default=native_answer, model_id="fake")))
    monkeypatch.setattr(
        deps, "build_answer_llm", lambda settings, memory_llm=None: StructuredLLM(FakeBackend(default=native_answer, model_id="fake"))
    )
    monkeypatch.setattr(deps, "answer_preset", lambda settings: type("P", (), {"kind": "llama", "name": "fake"})())
    return tmp_path


def _ingest(world: Path, db: str, *args: str, topics=TOPICS[:4]):
    chat = write_jsonl(world / f"{db}.jsonl", conversation(topics))
    return nemori("ingest", chat, "--db", world / db, "--json", *args)


@pytest.fixture
def native(world) -> Path:
    """A native memory: four topics, piano and garden merged, the kayak fact superseded."""
    check("ingest", _ingest(world, "native.db"))
    return world / "native.db"


@pytest.fixture
def amem(world) -> Path:
    check("ingest", _ingest(world, "amem.db", "--memory", "amem", topics=TOPICS[:3]))
    return world / "amem.db"


# -- ingest, flush ---------------------------------------------------------------


def test_ingest_report_and_flush(world):
    data = check("ingest", _ingest(world, "m.db", "--no-flush"))
    assert data["read"] == 16 and data["pending"] > 0
    flushed = check("flush", nemori("flush", "--db", world / "m.db", "--json"))
    assert flushed["source"] is None and flushed["episodes"] > 0 and flushed["pending"] == 0
    assert check("flush", nemori("flush", "--db", world / "m.db", "--json"))["episodes"] == 0  # nothing pending


def test_ingest_later_then_build_and_stop_with_none_running(world):
    stored = check("ingest", _ingest(world, "l.db", "--build", "later"))
    assert stored["build"] == "later" and stored["episodes"] == 0 and stored["built"]["pending"] == stored["added"] == 16
    assert stored["built"]["built_through"] is None and stored["built"]["building"] is False
    asked = check("ask", nemori("ask", "What did Priya say?", "--db", world / "l.db", "--json"))
    assert asked["built"]["pending"] == 16 and asked["unbuilt_memories"] > 0
    built = check("build", nemori("build", "--db", world / "l.db", "--json"))
    assert built["episodes"] > 0 and built["pending"] == 0 and built["built"]["pending"] == 0 and built["built"]["built_through"]
    assert check("stats", nemori("stats", "--db", world / "l.db", "--json"))["built"]["pending"] == 0
    stopped = check("build", nemori("build", "--stop", "--db", world / "l.db", "--json"))
    assert stopped == {"stopped": False, "running": False, "db": str(world / "l.db")}
    nothing = check("build", nemori("build", "--background", "--db", world / "l.db", "--json"))
    assert nothing["background"] is False and nothing["finished"] is True  # nothing pending: no worker started


def test_ingest_dry_run_plan_with_and_without_a_budget(world):
    chat = write_jsonl(world / "chat.jsonl", conversation())
    plain = check("ingest-dry-run", nemori("ingest", chat, "--db", world / "new.db", "--dry-run", "--json"))
    assert plain["dry_run"] is True and not plain["db_exists"] and "max_tokens" not in plain
    budget = check("ingest-dry-run", nemori("ingest", chat, "--db", world / "new.db", "--dry-run", "--max-tokens", "500", "--json"))
    assert budget["max_tokens"] == 500
    assert not (world / "new.db").exists()


# -- inspect, stats ----------------------------------------------------------------


def test_inspect_episodes_and_one_merged_episode(native):
    listed = check("inspect-episodes", nemori("inspect", "episodes", "--all", "--db", native, "--json"))
    merged = [e for e in listed["episodes"] if e["status"] == "active" and e["boundary"] == "merged"]
    assert merged and any(e["status"] == "superseded" for e in listed["episodes"])
    one = check("inspect-episode", nemori("inspect", "episode", merged[0]["id"], "--db", native, "--json"))
    assert one["merged_from"] and one["messages"]


def test_inspect_facts_and_a_fact_that_replaced_another(native):
    listed = check("inspect-facts", nemori("inspect", "facts", "--all", "--db", native, "--json"))
    newer = [f for f in listed["facts"] if f["status"] == "active" and "no longer" in f["text"]]
    assert newer and any(f["status"] == "superseded" for f in listed["facts"])
    one = check("inspect-fact", nemori("inspect", "fact", newer[0]["id"], "--db", native, "--json"))
    assert one["replaced"] and one["sources"]


def test_inspect_messages_summary_and_stats(native, world):
    assert check("inspect-messages", nemori("inspect", "messages", "--db", native, "--json"))["messages"]
    assert check("inspect-messages", nemori("inspect", "messages", "--pending", "--db", native, "--json"))["messages"] == []
    assert check("inspect-summary", nemori("inspect", "summary", "--db", native, "--json"))["summaries"] == []
    stats = check("stats", nemori("stats", "--db", native, "--json"))
    assert stats["stages"] and stats["counts"]["facts"] > 0
    check("ingest", _ingest(world, "summary.db", "--memory", "summary", topics=TOPICS[:2]))
    versions = check("inspect-summary", nemori("inspect", "summary", "--history", "--db", world / "summary.db", "--json"))
    assert len(versions["summaries"]) >= 2
    found = check("search", nemori("search", "kayak", "--db", world / "summary.db", "--json"))
    assert "summary" in {h["kind"] for h in found["hits"]}


def test_inspect_notes_and_an_evolved_note(amem):
    listed = check("inspect-notes", nemori("inspect", "notes", "--db", amem, "--json"))
    assert listed["notes"]
    shown = [check("inspect-note", nemori("inspect", "note", n["id"], "--db", amem, "--json")) for n in listed["notes"]]
    assert any(n["history"] for n in shown) and any(n["evolved"] for n in shown) and any(n["linked"] for n in shown)
    assert check("stats", nemori("stats", "--db", amem, "--json"))["counts"]["notes"] == len(listed["notes"])


# -- search, ask -------------------------------------------------------------------


def test_search_and_ask_on_episodes_facts_and_messages(native):
    found = check("search", nemori("search", "Ann paddles her kayak", "--db", native, "--json"))
    assert "fact" in {h["kind"] for h in found["hits"]}
    paper = check("search", nemori("search", "kayak", "--profile", "paper", "--db", native, "--json"))
    assert {"episode", "fact"} <= {h["kind"] for h in paper["hits"]} and any(h["messages"] for h in paper["hits"])
    raw = check("search", nemori("search", "kayak", "--messages", "5", "--k", "0", "--facts", "0", "--db", native, "--json"))
    assert {h["kind"] for h in raw["hits"]} == {"message"}
    answered = check("ask", nemori("ask", "What about the kayak?", "--db", native, "--json"))
    assert answered["answer"] == "The kayak." and answered["memories"]


def test_search_and_ask_on_notes(amem):
    found = check("search", nemori("search", "kayak", "--db", amem, "--json"))
    assert found["hits"] and {h["kind"] for h in found["hits"]} == {"note"}
    check("ask", nemori("ask", "What about the kayak?", "--db", amem, "--json"))


# -- forget ------------------------------------------------------------------------


def test_forget_fact_episode_user_and_scrub(native):
    facts = check("inspect-facts", nemori("inspect", "facts", "--db", native, "--json"))["facts"]
    check("forget-fact", nemori("forget", "fact", facts[0]["id"], "--db", native, "--json"))
    episodes = check("inspect-episodes", nemori("inspect", "episodes", "--db", native, "--json"))["episodes"]
    gone = check("forget-episode", nemori("forget", "episode", episodes[-1]["id"], "--db", native, "--json"))
    assert gone["counts"]["episodes"] >= 1
    whole = check("forget-user", nemori("forget", "user", "default", "--yes", "--db", native, "--json"))
    assert whole["counts"]["messages"] > 0
    check("forget-scrub", nemori("forget", "--scrub", "--db", native, "--json"))


def test_forget_note(amem):
    notes = check("inspect-notes", nemori("inspect", "notes", "--db", amem, "--json"))["notes"]
    gone = check("forget-note", nemori("forget", "note", notes[-1]["id"], "--db", amem, "--json"))
    assert gone["counts"]["notes"] == 1


# -- models, doctor, bench -------------------------------------------------------------


def test_models(world):
    assert check("models", nemori("models", "--json"))["models"]


def test_models_install_of_what_is_there_or_needs_nothing(world, tmp_path, monkeypatch):
    presets = tmp_path / "models.toml"
    presets.write_text('[llm.endpoint]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n', encoding="utf-8")
    monkeypatch.setenv("NEMORI_MODELS_FILE", str(presets))
    rows = check("models-install", nemori("models", "install", "endpoint", "--json"))["installed"]
    assert rows == [{"role": "model", "name": "endpoint", "outcome": "nothing to install"}]


def test_doctor_probed_and_not(monkeypatch, tmp_path):
    from tests.support.doctor_world import fakes, sensible

    model = tmp_path / "fake.gguf"
    model.write_bytes(b"GGUF" + bytes(1000))
    presets = tmp_path / "models.toml"
    presets.write_text(f'[llm.fake]\nkind = "gguf"\npath = "{model}"\n', encoding="utf-8")
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("NEMORI_MODELS_FILE", str(presets))
    build_llm, build_embedder = fakes(sensible)
    monkeypatch.setattr(deps, "build_llm", build_llm)
    monkeypatch.setattr(deps, "build_embedder", build_embedder)
    probed = check("doctor", nemori("doctor", "--model", "fake", "--json"))
    assert probed["stages"] and probed["overall"]
    bare = check("doctor", nemori("doctor", "--model", "fake", "--no-probe", "--json"))
    assert bare["stages"] == {} and bare["overall"] == {}
    unknown = check("doctor", nemori("doctor", "--model", "nope", "--no-probe", "--json"))
    assert unknown["verdict"] == "not fit"


def test_bench_report_and_systems(tmp_path, backend, embedder):
    from nemori_cli.bench import catalog, locomo
    from nemori_cli.bench.results import ResultLog
    from nemori_cli.bench.run import BenchRunner, Silent
    from nemori_cli.bench.systems import Shared
    from nemori_cli.memory.semantic import SemanticSettings
    from tests.support.bench_world import CONFIG, IDENTITY, SAMPLE, answer_like_a_reader
    from tests.unit.fakeworld import World

    World(backend, Answer=answer_like_a_reader, Summary={"summary": "Ann went to Paris; Bob adopted Luna."})
    shared = Shared(StructuredLLM(backend), embedder, SemanticSettings(), lambda text: len(text.split()), 4096)
    path = tmp_path / "mini_locomo.json"
    path.write_text(json.dumps([SAMPLE]))
    out = tmp_path / "out"
    log = ResultLog(out, {**CONFIG, "systems": ["nemori", "full-context", "rag-256"]}, identity_keys=IDENTITY)
    units = locomo.units(path, [], None, None, adversarial=False)
    BenchRunner("locomo", log, shared, catalog.resolve("nemori,full-context,rag-256"), locomo.score, None, Silent()).run(units)
    report = check("bench-report", nemori("bench", "report", out, "--json"))
    assert set(report["systems"]) == {"nemori", "full-context", "rag-256"}
    assert check("bench-systems", nemori("bench", "systems", "--json"))["systems"]
