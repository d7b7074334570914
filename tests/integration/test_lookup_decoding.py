"""nemori's own greedy loop and prompt lookup (llm/lookup_decoding.py) with the real tiny GGUF."""

from __future__ import annotations

import pytest

from nemori_cli.llm.schema import decoder_safe
from tests.integration.test_batched_decoding import narration_prompts

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def backends(tmp_path_factory):
    """Two backends on the same file: ours (no guesses unless a test sets some) and llama-cpp-python's loop."""
    from nemori_cli.config import load_presets
    from nemori_cli.llm.llamacpp import LlamaCppBackend
    from nemori_cli.modelfiles import gguf_path

    path = gguf_path(load_presets().llms["tiny"], tmp_path_factory.mktemp("c"))
    ours = LlamaCppBackend(path, name="tiny", n_ctx=2048, lookup=0)
    theirs = LlamaCppBackend(path, name="tiny", n_ctx=2048, lookup=None)
    yield ours, theirs
    ours.lookup = 0


def schema():
    from nemori_cli.prompts import narrative

    return decoder_safe(narrative.Narrative.model_json_schema())


def test_without_guesses_the_same_tokens_as_create_chat_completion(backends):
    ours, theirs = backends
    ours.lookup = 0
    chats = narration_prompts(4)
    mine = [ours.chat(c, schema=schema(), max_tokens=200, temperature=0.0) for c in chats]
    other = [theirs.chat(c, schema=schema(), max_tokens=200, temperature=0.0) for c in chats]
    assert ours._lookup is not None and theirs._lookup is None  # each took its own path
    assert [m.text for m in mine] == [t.text for t in other]
    assert [(m.prompt_tokens, m.completion_tokens) for m in mine] == [(t.prompt_tokens, t.completion_tokens) for t in other]
    assert ours._lookup.stats.drafted == 0 and ours._lookup.stats.decodes <= ours._lookup.stats.written


def test_with_guesses_fewer_decodes_than_tokens_and_every_answer_valid(backends):
    from nemori_cli.llm.base import _validate
    from nemori_cli.prompts import narrative

    ours, _theirs = backends
    ours.lookup = 4
    try:
        outs = [ours.chat(c, schema=schema(), max_tokens=300, temperature=0.0) for c in narration_prompts(4)]
        stats = ours._lookup.stats
        assert ours._lookup.draft_max == 4
        assert stats.drafted > 0 and stats.accepted > 0
        assert stats.decodes < stats.written  # guessed tokens were kept: fewer decodes than tokens
        for out in outs:
            if out.completion_tokens < 300:  # not cut at max_tokens
                _validate(narrative.Narrative, out.text)
    finally:
        ours.lookup = 0


def test_the_cache_it_leaves_is_true_for_the_next_call_on_either_path(backends):
    ours, _theirs = backends
    (chat,) = narration_prompts(1)
    first = ours.chat(chat, schema=schema(), max_tokens=200, temperature=0.0)
    # The context holds the prompt and the answer (the last token too, unless the answer was cut at max_tokens).
    assert int(ours.llama.n_tokens) - first.prompt_tokens in (first.completion_tokens, first.completion_tokens - 1)
    assert list(ours.llama.input_ids[: first.prompt_tokens]) == ours._prompt(chat)
    # llama-cpp-python's loop on the same context reuses what matches, and still writes the same answer.
    again = ours._chat_llama(chat, schema(), 200, 0.0)
    assert again.text == first.text
    assert ours.chat(chat, schema=schema(), max_tokens=200, temperature=0.0).text == first.text


def test_max_tokens_cuts_the_answer_where_the_other_path_cuts_it(backends):
    ours, theirs = backends
    (chat,) = narration_prompts(1)
    mine = ours.chat(chat, schema=schema(), max_tokens=17, temperature=0.0)
    other = theirs.chat(chat, schema=schema(), max_tokens=17, temperature=0.0)
    assert mine.completion_tokens == 17 and mine.text == other.text


def test_a_prompt_longer_than_the_context_is_a_model_error_in_the_same_words(backends):
    from nemori_cli.errors import ModelError

    ours, theirs = backends
    huge = [{"role": "user", "content": "word " * 3000}]
    with pytest.raises(ModelError) as mine:
        ours.chat(huge, schema=schema(), max_tokens=20, temperature=0.0)
    with pytest.raises(ModelError) as other:
        theirs.chat(huge, schema=schema(), max_tokens=20, temperature=0.0)
    assert "exceed context window of 2048" in mine.value.message
    assert mine.value.message == other.value.message
    (chat,) = narration_prompts(1)
    assert ours.chat(chat, schema=schema(), max_tokens=40, temperature=0.0).completion_tokens > 0  # still answers


def test_an_interrupt_mid_answer_leaves_a_clean_context(backends, monkeypatch):
    """Ctrl-C between two decodes: the error passes, the cache is forgotten, the next call answers as before."""
    from nemori_cli.llm import lookup_decoding

    ours, _theirs = backends
    (chat,) = narration_prompts(1)
    before = ours.chat(chat, schema=schema(), max_tokens=60, temperature=0.0).text
    calls = {"n": 0}
    real = lookup_decoding.LookupDecoder._logits

    def interrupted(self, index):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return real(self, index)

    monkeypatch.setattr(lookup_decoding.LookupDecoder, "_logits", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ours.chat(chat, schema=schema(), max_tokens=60, temperature=0.0)
    assert int(ours.llama.n_tokens) == 0
    monkeypatch.setattr(lookup_decoding.LookupDecoder, "_logits", real)
    assert ours.chat(chat, schema=schema(), max_tokens=60, temperature=0.0).text == before
