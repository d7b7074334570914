"""Sequences decoded together (llm/batched.py) with the real tiny GGUF: the same answers as one at a time, valid under the grammar."""

from __future__ import annotations

import json

import pytest

from nemori_cli.llm.base import ChatRequest, StructuredLLM
from nemori_cli.llm.batched import BatchedDecoder, Request
from nemori_cli.llm.schema import decoder_safe
from tests.integration.conftest import EXAMPLE, run_json

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from nemori_cli.config import load_presets
    from nemori_cli.llm.llamacpp import LlamaCppBackend
    from nemori_cli.modelfiles import gguf_path

    preset = load_presets().llms["tiny"]
    backend = LlamaCppBackend(gguf_path(preset, tmp_path_factory.mktemp("c")), name="tiny", n_ctx=2048, prefix_cache=False, parallel=4)
    return backend


def narration_prompts(n: int) -> list[list[dict]]:
    from nemori_cli.domain import Message
    from nemori_cli.importers.jsonl import read_jsonl
    from nemori_cli.prompts import narrative

    with EXAMPLE.open("rb") as f:
        rows = read_jsonl(f, str(EXAMPLE))
    messages = [Message(i, "u", f"k{i}", m.speaker, m.content, m.timestamp, m.source_id, m.session) for i, m in enumerate(rows, 1)]
    return [narrative.render(messages[i * 4 : i * 4 + 4]) for i in range(n)]


def schema():
    from nemori_cli.prompts import narrative

    return decoder_safe(narrative.Narrative.model_json_schema())


def test_one_sequence_writes_what_create_chat_completion_writes(tiny):
    (chat,) = narration_prompts(1)
    alone = tiny.chat(chat, schema=schema(), max_tokens=120, temperature=0.0)
    decoder = BatchedDecoder(tiny.llama, sequences=1, n_ctx_per_sequence=2048, n_threads=tiny._threads)
    try:
        (out,) = decoder.generate([Request(tiny._prompt(chat), tiny._grammar(schema()), 120)])
    finally:
        decoder.close()
    assert out.prompt_tokens == alone.prompt_tokens  # the same chat template, the same tokens
    assert tiny.llama.detokenize(out.tokens).decode("utf-8", errors="ignore") == alone.text


def test_four_together_are_each_valid_and_mostly_the_same_as_alone(tiny):
    from nemori_cli.llm.base import _validate
    from nemori_cli.prompts import narrative

    chats = narration_prompts(4)
    alone = [tiny.chat(c, schema=schema(), max_tokens=120, temperature=0.0).text for c in chats]
    together = tiny.chat_many([ChatRequest(c, schema(), 120, 0.0) for c in chats])
    assert tiny._batched is not None and tiny._batched.timing.steps > 0  # decoded together, not one by one
    texts = [t.text for t in together]
    for text in texts:
        if text.count("{") == text.count("}"):  # not cut at max_tokens
            _validate(narrative.Narrative, text)
    assert texts != [texts[0]] * 4  # each sequence read its own prompt
    # Batched arithmetic rounds differently, so a near tie may go the other way; most answers agree token for token.
    assert sum(a == b for a, b in zip(alone, texts)) >= 2, (alone, texts)


def test_structured_complete_many_over_the_real_backend(tiny):
    from nemori_cli import stages
    from nemori_cli.prompts import narrative

    llm = StructuredLLM(tiny)
    out = llm.complete_many(narration_prompts(3), schema=narrative.Narrative, stage=stages.NARRATION)
    assert len(out) == 3 and len(llm.log.calls) == 3


def test_ingest_with_parallel_narration_makes_the_same_kind_of_memory(tmp_path, cache_dir):
    env = {"NEMORI_CACHE_DIR": str(cache_dir)}
    report = run_json("ingest", str(EXAMPLE), "--db", str(tmp_path / "p.db"), "--parallel", "4", env=env)
    assert report["pending"] == 0 and report["episodes"] >= 1
    listed = run_json("inspect", "episodes", "--db", str(tmp_path / "p.db"), env=env)
    assert sum(len(e["messages"]) for e in listed["episodes"]) == report["read"]  # every message in exactly one episode
    assert len({m["id"] for e in listed["episodes"] for m in e["messages"]}) == report["read"]
    assert all(json.dumps(e["narrative"]) for e in listed["episodes"])
