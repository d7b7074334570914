"""A tiny LoCoMo sample and a fake-model world for the bench's tests (tests/unit/test_bench_*.py)."""

from __future__ import annotations

import json

import pytest

from nemori_cli.bench.systems import Shared
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.memory.semantic import SemanticSettings
from tests.unit.fakeworld import World

SAMPLE = {
    "sample_id": "s1",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I flew to Paris yesterday for the art fair."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Paris in spring, lovely. Did you see the Louvre?"},
            {"speaker": "Ann", "dia_id": "D1:3", "text": "Yes, the Louvre was packed but worth it."},
            {"speaker": "Bob", "dia_id": "D1:4", "text": "Send me photos of the paintings."},
        ],
        "session_2_date_time": "10:00 am on 20 May, 2023",
        "session_2": [
            {"speaker": "Bob", "dia_id": "D2:1", "text": "We adopted a kitten this week."},
            {"speaker": "Ann", "dia_id": "D2:2", "text": "What did you call the kitten?"},
            {"speaker": "Bob", "dia_id": "D2:3", "text": "Her name is Luna, she is grey."},
            {"speaker": "Ann", "dia_id": "D2:4", "text": "Luna is a lovely name for a cat."},
        ],
    },
    "qa": [
        {"question": "Where did Ann travel for the art fair?", "answer": "Paris", "evidence": ["D1:1"], "category": 4},
        {"question": "What is the name of Bob's cat?", "answer": "Luna", "evidence": ["D2:3"], "category": 4},
        {"question": "When did Ann fly to Paris?", "answer": "7 May 2023", "evidence": ["D1:1"], "category": 2},
        {"question": "What did Ann paint?", "adversarial_answer": "a cat", "evidence": ["D1:4"], "category": 5},
    ],
}


def answer_like_a_reader(messages, schema):
    question = messages[-1]["content"].rsplit("Question: ", 1)[1]
    if "travel" in question:
        return {"answer": "Paris", "sources": []}
    if "cat" in question:
        return {"answer": "Her name is Luna", "sources": []}
    return {"answer": "I do not know", "sources": []}


@pytest.fixture
def locomo_path(tmp_path):
    path = tmp_path / "mini_locomo.json"
    path.write_text(json.dumps([SAMPLE]))
    return path


@pytest.fixture
def shared(backend, embedder):
    World(backend, Answer=answer_like_a_reader, Summary={"summary": "Ann went to Paris; Bob adopted Luna."})
    return Shared(StructuredLLM(backend), embedder, SemanticSettings(), lambda text: len(text.split()), 4096)


CONFIG = {"benchmark": "locomo", "model": {"name": "fake"}, "data": {"sha256": "x"}, "systems": []}
IDENTITY = ("benchmark", "model", "data")
