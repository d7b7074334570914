"""A model that cannot be loaded (no memory for it, a broken file) is one ModelError line, exit 3, before anything is written."""

from __future__ import annotations

import sys
import types

import pytest

from nemori_cli.errors import ModelError


@pytest.mark.parametrize(
    ("raised", "said"), [(MemoryError(), "not enough memory to load"), (ValueError("Failed to load model from file"), "cannot load")]
)
def test_a_failed_load_is_one_model_error(monkeypatch, tmp_path, raised, said):
    from nemori_cli.llm import llamacpp

    def refuse(**kw):
        raise raised

    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=refuse))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"\0" * 2**20)
    with pytest.raises(ModelError) as caught:
        llamacpp.LlamaCppBackend(model, name="tiny", n_ctx=2048)
    assert said in caught.value.message and "smaller model" in caught.value.message
    assert caught.value.exit_code == 3 and "\n" not in caught.value.message
