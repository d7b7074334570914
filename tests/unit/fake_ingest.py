"""Running `nemori ingest` / `flush` in-process with the fake LLM and embedder, on a real SQLite file.

The fake model answers by response schema and never parses prompt layout (the
prompts change independently): a narrative is titled by whichever topic word
the prompt contains, so episodes on different topics stay dissimilar.
Conversations are one topic per day, so the two-hour silence cuts episodes
deterministically, whatever the model would say.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from nemori_cli import deps
from nemori_cli.cli.app import app
from nemori_cli.embed.fake import FakeEmbedder
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.llm.fake import FakeBackend

TOPICS = ("kayak", "piano", "garden", "chess", "bakery", "tennis")


def answer(messages, schema) -> dict:
    title = schema.get("title")
    prompt = "\n".join(m["content"] for m in messages)
    if title == "Partition":
        return {"boundaries": []}
    if title in ("Narrative", "MergedEpisode"):
        topic = next((t for t in TOPICS if t in prompt), "talk")
        return {"title": f"Ann and Bob on {topic}", "narrative": f"On 8 May 2023 Ann and Bob talked about the {topic}."}
    return {
        "Continuation": {"same_event": False},
        "Prediction": {"prediction": "Ann and Bob talked."},
        "Distilled": {"facts": []},
        "Outdated": {"outdated": False},
        "Summary": {"summary": "Ann and Bob talked about several things."},
        "NoteAttributes": {"keywords": ["ann", "bob"], "context": "Ann and Bob talk.", "tags": ["talk"]},
        "LinkDecision": {"links": [], "updates": []},
    }[title]


def conversation(topics=TOPICS[:4], per_topic: int = 4) -> list[dict]:
    """JSON Lines records: per_topic messages on each topic, one topic per day."""
    start = datetime(2023, 5, 8, 10, 0)
    rows = []
    for day, topic in enumerate(topics):
        for i in range(per_topic):
            rows.append(
                {
                    "id": f"{topic}-{i}",
                    "speaker": "Ann" if i % 2 == 0 else "Bob",
                    "content": f"Let us talk about the {topic} again, point {i}.",
                    "timestamp": (start + timedelta(days=day, minutes=i)).isoformat(),
                }
            )
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def use_fakes(monkeypatch, *, model_id: str = "fake") -> list[FakeBackend]:
    """Every LLM the CLI builds is a fake answering ``answer``; returns the backends built."""
    built: list[FakeBackend] = []

    def build_llm(settings):
        backend = FakeBackend(default=answer, model_id=model_id)
        built.append(backend)
        return StructuredLLM(backend)

    monkeypatch.setattr(deps, "build_llm", build_llm)
    monkeypatch.setattr(deps, "build_embedder", lambda settings, db=None: FakeEmbedder())
    monkeypatch.setattr(deps, "check_embedder_files", lambda settings: None)
    return built


def isolate(monkeypatch, tmp_path: Path) -> Path:
    """No user presets, database or saved rates of the machine leak in; returns the cache dir."""
    for name in ("NEMORI_DB", "NEMORI_USER", "NEMORI_MODEL", "NEMORI_EMBEDDER", "NEMORI_MODELS_FILE"):
        monkeypatch.delenv(name, raising=False)
    cache = tmp_path / "cache"
    monkeypatch.setenv("NEMORI_CACHE_DIR", str(cache))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return cache


def ingested(tmp_path: Path, monkeypatch, *flags: str) -> Path:
    """A new database with conversation() ingested by the fake LLM and embedder, ``flags`` added to `ingest`."""
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    db = tmp_path / "m.db"
    assert nemori("ingest", write_jsonl(tmp_path / "c.jsonl", conversation()), "--db", db, *flags).exit_code == 0
    return db


def nemori(*args: str):
    """The CLI in-process; a NemoriError comes back as result.exception."""
    return CliRunner().invoke(app, [str(a) for a in args])


def use_fake_answers(monkeypatch, reply: str = "the kayak") -> list[FakeBackend]:
    """The answer model (`ask`) is a fake too, saying ``reply`` to every question; returns the backends built, for their prompts."""
    built: list[FakeBackend] = []

    def answering(messages, schema):
        if schema.get("title") == "Answer":
            quoted = {"quote": f"said: {reply}"} if "quote" in schema.get("properties", {}) else {}  # answer_form="quote"
            return {**quoted, "answer": reply, "sources": []}
        return answer(messages, schema)

    def build_answer_llm(settings, memory_llm=None):
        built.append(FakeBackend(default=answering))
        return StructuredLLM(built[-1])

    monkeypatch.setattr(deps, "build_answer_llm", build_answer_llm)
    monkeypatch.setattr(deps, "answer_preset", lambda settings: type("Preset", (), {"kind": "llama", "name": "fake"})())
    return built
