"""The shortlist grammar decodes exactly what llama.cpp's full-vocabulary grammar does."""

from __future__ import annotations

import json

import pytest

from nemori_cli.llm.fast_grammar import ShortlistGrammar

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from nemori_cli.config import load_presets
    from nemori_cli.llm.llamacpp import LlamaCppBackend
    from nemori_cli.modelfiles import gguf_path

    preset = load_presets().llms["tiny"]
    return LlamaCppBackend(gguf_path(preset, tmp_path_factory.mktemp("c")), name="tiny", n_ctx=2048)


SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "year": {"enum": [2021, 2022, 2023], "type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"], "type": "string"}, "maxItems": 2},
    },
    "required": ["city", "year", "tags"],
}
PROMPT = [{"role": "user", "content": "Sam moved to Lisbon in 2023. Give the city, the year and some tags as JSON."}]


def test_same_tokens_as_the_full_grammar_and_always_valid(tiny):
    from llama_cpp import LlamaGrammar, LogitsProcessorList

    gbnf = tiny._grammar(SCHEMA)
    full = tiny.llama.create_chat_completion(
        messages=PROMPT, grammar=LlamaGrammar.from_string(gbnf, verbose=False), max_tokens=60, temperature=0.0
    )
    fast = tiny.llama.create_chat_completion(
        messages=PROMPT, logits_processor=LogitsProcessorList([ShortlistGrammar(tiny.llama, gbnf)]), max_tokens=60, temperature=0.0
    )
    a, b = full["choices"][0]["message"]["content"], fast["choices"][0]["message"]["content"]
    assert a == b
    parsed = json.loads(b)
    assert parsed["year"] in (2021, 2022, 2023) and len(parsed["city"]) <= 20 and set(parsed["tags"]) <= {"a", "b", "c"}


def test_an_unparseable_grammar_is_an_error_not_a_crash(tiny):
    with pytest.raises(ValueError, match="could not parse"):
        ShortlistGrammar(tiny.llama, 'root ::= "unterminated')
