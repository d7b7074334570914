"""embed/numpy_bert.py without a real model: which folders it takes, its GELU, and an embedder that loads nothing at construction.

A tiny BERT folder is written here (the small JSON files, and a safetensors file of 8-wide tensors); each test
changes one thing in it. The vectors themselves are compared with sentence-transformers' in
tests/integration/test_query_embed.py, on all-MiniLM-L6-v2.
"""

from __future__ import annotations

import json
import math
import sys
import types

import numpy as np
import pytest
from safetensors.numpy import save_file

from nemori_cli.embed import numpy_bert
from nemori_cli.embed.numpy_bert import folder_shape, gelu, supports

HIDDEN, LAYERS = 8, 2
MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
]
POOLING = {
    "word_embedding_dimension": HIDDEN,
    "pooling_mode_cls_token": False,
    "pooling_mode_mean_tokens": True,
    "pooling_mode_max_tokens": False,
    "pooling_mode_mean_sqrt_len_tokens": False,
}
CONFIG = {
    "architectures": ["BertModel"],
    "hidden_act": "gelu",
    "hidden_size": HIDDEN,
    "intermediate_size": 4 * HIDDEN,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "num_attention_heads": 2,
    "num_hidden_layers": LAYERS,
    "position_embedding_type": "absolute",
    "type_vocab_size": 2,
    "vocab_size": 30,
}


def _weights(prefix: str = "") -> dict[str, np.ndarray]:
    shapes = {
        "embeddings.word_embeddings.weight": (30, HIDDEN),
        "embeddings.position_embeddings.weight": (512, HIDDEN),
        "embeddings.token_type_embeddings.weight": (2, HIDDEN),
        "embeddings.LayerNorm.weight": (HIDDEN,),
        "embeddings.LayerNorm.bias": (HIDDEN,),
    }
    for i in range(LAYERS):
        for part in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            shapes |= {f"encoder.layer.{i}.{part}.weight": (HIDDEN, HIDDEN), f"encoder.layer.{i}.{part}.bias": (HIDDEN,)}
        for part in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes |= {f"encoder.layer.{i}.{part}.weight": (HIDDEN,), f"encoder.layer.{i}.{part}.bias": (HIDDEN,)}
        shapes |= {
            f"encoder.layer.{i}.intermediate.dense.weight": (4 * HIDDEN, HIDDEN),
            f"encoder.layer.{i}.intermediate.dense.bias": (4 * HIDDEN,),
        }
        shapes |= {f"encoder.layer.{i}.output.dense.weight": (HIDDEN, 4 * HIDDEN), f"encoder.layer.{i}.output.dense.bias": (HIDDEN,)}
    return {prefix + name: np.zeros(shape, dtype=np.float32) for name, shape in shapes.items()}


@pytest.fixture()
def folder(tmp_path):
    """A folder as sentence-transformers saves all-MiniLM-L6-v2, its model 8 wide; supports() says yes to it."""
    root = tmp_path / "model"
    (root / "1_Pooling").mkdir(parents=True)
    (root / "modules.json").write_text(json.dumps(MODULES))
    (root / "1_Pooling" / "config.json").write_text(json.dumps(POOLING))
    (root / "config.json").write_text(json.dumps(CONFIG))
    (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 256, "do_lower_case": False}))
    (root / "tokenizer.json").write_text("{}")  # read by the encoder only, never by supports()
    save_file(_weights(), str(root / "model.safetensors"))
    return root


def _edit(path, **changes):
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def test_the_tiny_folder_is_taken_and_its_shape_read(folder):
    assert supports(folder)
    assert folder_shape(folder) == (HIDDEN, 256)


def test_weights_saved_under_bert_are_taken_too(folder):
    save_file(_weights("bert."), str(folder / "model.safetensors"))
    assert supports(folder)


@pytest.mark.parametrize("name", numpy_bert.FILES + ("1_Pooling/config.json",))
def test_a_missing_file_is_refused(folder, name):
    (folder / name).unlink()
    assert not supports(folder)


def test_cls_pooling_is_refused(folder):
    _edit(folder / "1_Pooling" / "config.json", pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
    assert not supports(folder)
    assert folder_shape(folder) == (HIDDEN, 256)  # one mode: the width is still the pooling's


def test_two_pooling_modes_are_refused_and_leave_the_width_unread(folder):
    _edit(folder / "1_Pooling" / "config.json", pooling_mode_max_tokens=True)
    assert not supports(folder)
    assert folder_shape(folder) is None  # two modes side by side: sentence-transformers tells the width


@pytest.mark.parametrize("mode", ["mean", ["mean"]])
def test_the_new_pooling_key_is_read(folder, mode):
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"embedding_dimension": HIDDEN, "pooling_mode": mode}))
    assert supports(folder)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"embedding_dimension": HIDDEN, "pooling_mode": "cls"}))
    assert not supports(folder)


def test_an_extra_module_is_refused(folder):
    dense = {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}
    (folder / "modules.json").write_text(json.dumps([*MODULES, dense]))
    assert not supports(folder)
    assert folder_shape(folder) is None  # a Dense layer sets the width: not read here


def test_without_normalize_it_is_refused_but_its_shape_read(folder):
    (folder / "modules.json").write_text(json.dumps(MODULES[:2]))
    assert not supports(folder)
    assert folder_shape(folder) == (HIDDEN, 256)


def test_modules_in_another_order_are_refused(folder):
    (folder / "modules.json").write_text(json.dumps([MODULES[1], MODULES[0], MODULES[2]]))
    assert not supports(folder)


@pytest.mark.parametrize(
    "change",
    [
        {"model_type": "roberta"},
        {"model_type": "distilbert"},
        {"hidden_act": "gelu_new"},
        {"hidden_act": "relu"},
        {"position_embedding_type": "relative_key"},
        {"is_decoder": True},
        {"num_attention_heads": 3},  # 8 is not a multiple of 3
        {"num_hidden_layers": LAYERS + 1},  # a layer the weights do not hold
        {"hidden_size": 16},  # wider than the pooling says
        {"max_position_embeddings": 128},  # fewer positions than max_seq_length
        {"hidden_size": None},
    ],
)
def test_another_model_is_refused(folder, change):
    _edit(folder / "config.json", **change)
    assert not supports(folder)


def test_lowercasing_or_a_default_prompt_is_refused(folder):
    _edit(folder / "sentence_bert_config.json", do_lower_case=True)
    assert not supports(folder)
    _edit(folder / "sentence_bert_config.json", do_lower_case=False)
    (folder / "config_sentence_transformers.json").write_text(json.dumps({"prompts": {"query": "q: "}, "default_prompt_name": "query"}))
    assert not supports(folder)


def test_unreadable_files_are_refused(folder):
    (folder / "config.json").write_text("{not json")
    assert not supports(folder)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    (folder / "model.safetensors").write_bytes(b"\x00" * 16)
    assert not supports(folder)
    (folder / "modules.json").write_text(json.dumps([{"type": "my_package.Transformer"}]))
    assert not supports(folder) and folder_shape(folder) is None


def test_no_max_seq_length_leaves_the_shape_unread(folder):
    (folder / "sentence_bert_config.json").write_text(json.dumps({"do_lower_case": False}))
    assert folder_shape(folder) is None and not supports(folder)


def test_gelu_is_exact_to_float32():
    x = np.concatenate([np.linspace(-12, 12, 48_001), [0.0, -0.0, 1e-30, -1e-30, 40.0, -40.0, 3.4e38, -3.4e38]]).astype(np.float32)
    wanted = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in x.astype(np.float64)])
    got = gelu(x)
    assert got.dtype == np.float32
    # Within one float32 step of the value from the C library's erfc, everywhere; below x = -8.5 (z capped at 6),
    # within 1e-15 of it (the true value is smaller still; torch's float32 GELU is exactly 0 there).
    step = np.maximum(np.spacing(np.abs(wanted).astype(np.float32)).astype(np.float64), 1e-15)
    assert np.all(np.abs(got.astype(np.float64) - wanted) <= step)


def test_gelu_keeps_the_shape_of_its_input():
    x = np.arange(-6, 6, 0.5, dtype=np.float32).reshape(4, 6)
    assert gelu(x).shape == (4, 6)


def test_the_embedder_knows_its_size_without_loading_sentence_transformers(folder, monkeypatch):
    from nemori_cli.embed.sentence import SentenceTransformerEmbedder

    def refuse(path, device):
        raise AssertionError("sentence-transformers was loaded")

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(SentenceTransformer=refuse))
    embedder = SentenceTransformerEmbedder(str(folder), model_name="tiny")
    assert (embedder.dimensions, embedder.max_chars) == (HIDDEN, 16 * 256)
    with pytest.raises(AssertionError, match="was loaded"):  # the first documents load it
        embedder.embed_documents(["a text"])


def test_a_folder_that_does_not_say_its_size_loads_sentence_transformers_at_once(folder, monkeypatch):
    from nemori_cli.embed.sentence import SentenceTransformerEmbedder

    class Model:
        max_seq_length = 128

        def __init__(self, path, device):
            pass

        def get_embedding_dimension(self):
            return 24

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(SentenceTransformer=Model))
    dense = {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}
    (folder / "modules.json").write_text(json.dumps([*MODULES, dense]))
    embedder = SentenceTransformerEmbedder(str(folder), model_name="tiny")
    assert (embedder.dimensions, embedder.max_chars) == (24, 16 * 128)
    assert isinstance(embedder.model, Model)
