"""KV snapshots with the real llama.cpp: a restored prefix is the prefix a full read would give."""

from __future__ import annotations

import json

import llama_cpp
import numpy as np
import pytest

pytestmark = pytest.mark.integration

SHARED = "You keep a diary of what people say. " * 12  # long enough to be worth a restore
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    from nemori_cli.config import load_presets
    from nemori_cli.llm.llamacpp import LlamaCppBackend
    from nemori_cli.modelfiles import gguf_path

    preset = load_presets().llms["tiny"]
    return LlamaCppBackend(gguf_path(preset, tmp_path_factory.mktemp("c")), name="tiny", n_ctx=2048)


def _last_logits(llama) -> np.ndarray:
    pointer = llama_cpp.llama_get_logits_ith(llama._ctx.ctx, -1)
    return np.ctypeslib.as_array(pointer, shape=(llama.n_vocab(),)).copy()


def test_a_restored_snapshot_continues_exactly_like_a_full_read(backend):
    llama, states = backend.llama, backend.states
    first = llama.tokenize((SHARED + "Ann sails.").encode())
    other = llama.tokenize(("Something else entirely. " * 20).encode())
    next_token = llama.tokenize(b" Bob", add_bos=False)[0]

    llama.reset()
    llama.eval(first)
    states.after(SHARED + "Ann sails.")
    llama.reset()
    llama.eval(other)
    states.after("Something else entirely. " * 20)

    states.before(SHARED + "Ann sails. Bob")  # shares far more with the first snapshot than with what is live
    assert states.restores == 1 and llama.n_tokens == len(first)
    llama.eval([next_token])
    restored = _last_logits(llama)

    llama.reset()
    llama._ctx.kv_cache_clear()
    llama.eval([*first, next_token])
    fresh = _last_logits(llama)
    assert int(np.argmax(restored)) == int(np.argmax(fresh))
    assert np.max(np.abs(restored - fresh)) < 0.5  # batch shapes differ, the numbers barely


def test_alternating_prompts_restore_their_own_prefix_and_still_answer(backend):
    states = backend.states
    before = states.restores
    prompts = [
        [{"role": "system", "content": SHARED}, {"role": "user", "content": f"Is {word} a word? Answer with JSON."}]
        for word in ("cat", "dog")
    ]
    other = [{"role": "system", "content": "You judge. " * 30}, {"role": "user", "content": "Is this fine?"}]
    for messages in (prompts[0], other, prompts[1]):
        raw = backend.chat(messages, schema=SCHEMA, max_tokens=12, temperature=0.0)
        assert isinstance(json.loads(raw.text)["ok"], bool)
    assert states.restores > before  # the third call took the first one's system prompt from a snapshot
