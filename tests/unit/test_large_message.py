"""One very large message (issue 42, defect 15): `ingest --build later` of a 50 MB message ran for minutes, silent, in 1.24 GB.

The embedder is given the beginning of a message only (what the model reads),
the full-text index keeps every word, the JSONL reader holds a line in at most
two forms at once, and stderr says what is happening. With the fake embedder
and the CLI in-process; what the real tokenizer cost is in docs/RELIABILITY.md.
"""

from __future__ import annotations

import json
import tracemalloc
from datetime import datetime

import numpy as np
import pytest

from nemori_cli.domain import IncomingMessage, Message
from nemori_cli.embed.base import DEFAULT_MAX_CHARS
from nemori_cli.embed.fake import FakeEmbedder
from nemori_cli.embed.sentence import SentenceTransformerEmbedder
from nemori_cli.importers.jsonl import read_jsonl
from nemori_cli.pipeline.intake import store_messages
from nemori_cli.pipeline.partition import PartitionSettings, partition
from nemori_cli.store import message_index
from nemori_cli.store.sqlite import SqliteStore
from tests.unit.fake_ingest import isolate, nemori, use_fakes

MB = 1_000_000


def big_text(chars: int, last_word: str = "zanzibar") -> str:
    unit = "alpha beta gamma delta epsilon zeta eta theta iota kappa "
    body = unit * (chars // len(unit) + 1)
    return body[: chars - len(last_word) - 1] + " " + last_word


def write_big(path, chars: int):
    rows = [
        {"id": "m12", "speaker": "Ann", "content": big_text(chars), "timestamp": "2024-03-04T19:09:02"},
        {"id": "m13", "speaker": "Bob", "content": "ok", "timestamp": "2024-03-04T19:10:02"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_embedder_is_given_the_beginning_and_the_full_text_index_every_word(tmp_path):
    embedder = FakeEmbedder()
    db = SqliteStore(tmp_path / "m.db")
    try:
        message = IncomingMessage(speaker="Ann", content=big_text(2 * MB), timestamp=datetime(2024, 3, 4, 19, 9), source_id="m12")
        from nemori_cli.memory.profile import DEFAULT

        assert store_messages(db, "u", DEFAULT, embedder, [message]) == 1
        embedded = [t for call in embedder.calls for t in call]
        assert embedded and max(len(t) for t in embedded) <= DEFAULT_MAX_CHARS  # was the whole 2 MB
        assert embedded[0].startswith("Ann: alpha beta")
        assert [i for i, _ in message_index.text_search(db, "u", "zanzibar", 5)]  # the last word is found: indexed whole
    finally:
        db.close()


def test_partition_by_similarity_embeds_the_beginning_too():
    from tests.conftest import make_messages

    embedder = FakeEmbedder()
    stored = [
        Message(
            id=i + 1,
            user="u",
            key=f"k{i}",
            speaker=m.speaker,
            content=big_text(MB) if i == 3 else m.content,
            timestamp=m.timestamp,
            source_id=None,
            session=None,
        )
        for i, m in enumerate(make_messages(12))
    ]
    groups = partition(stored, llm=None, embedder=embedder, settings=PartitionSettings(method="similarity"))  # type: ignore[arg-type]
    assert sum(len(g.messages) for g in groups) == 12
    assert max(len(t) for call in embedder.calls for t in call) <= DEFAULT_MAX_CHARS


def test_the_sentence_transformers_embedder_cuts_every_text_to_what_its_model_reads():
    seen: list[list[str]] = []

    class Model:
        max_seq_length = 256

        def encode(self, texts, **_):
            seen.append(list(texts))
            return np.ones((len(texts), 4), dtype=np.float32)

    embedder = SentenceTransformerEmbedder.__new__(SentenceTransformerEmbedder)
    embedder.model, embedder.dimensions, embedder.batch_size = Model(), 4, 32  # type: ignore[assignment]
    embedder.max_chars = 16 * 256
    embedder.embed_documents(["short", "x" * (5 * MB)])
    assert [len(t) for t in seen[0]] == [5, 4096]


def test_reading_a_large_line_holds_it_at_most_twice(tmp_path):
    path = write_big(tmp_path / "big.jsonl", 10 * MB)
    tracemalloc.start()
    try:
        with path.open("rb") as stream:
            messages = read_jsonl(stream, "big.jsonl")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(messages[0].content) == 10 * MB
    assert peak < 2.3 * 10 * MB, f"{peak / MB:.0f} MB to read a 10 MB line"  # was 40 MB: four copies of the line


@pytest.fixture()
def world(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    return tmp_path


def test_ingest_later_of_a_20_mb_message_is_bounded_and_says_so(world):
    path = write_big(world / "big.jsonl", 20 * MB)
    tracemalloc.start()
    try:
        result = nemori("ingest", path, "--build", "later", "--db", world / "m.db")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.exit_code == 0, result.output
    # The message held twice while its line is read, and once as it is stored; the fake embedder's word list of the
    # whole message was 12 times its size (697 MB for 44 MB).
    assert peak < 3 * 20 * MB, f"{peak / MB:.0f} MB for a 20 MB message"
    assert "message 'm12' (line 1) is 20.0 MB; stored whole and searchable by every word" in result.stderr
    assert result.stderr.count("nemori:") == 1
    assert "read 2 messages (2 new)" in result.stdout
    found = nemori("search", "zanzibar", "--db", world / "m.db", "--json")
    assert found.exit_code == 0 and "m12" in found.stdout


def test_a_message_under_a_megabyte_says_nothing(world):
    path = write_big(world / "big.jsonl", MB - 10)
    result = nemori("ingest", path, "--build", "later", "--db", world / "m.db")
    assert result.exit_code == 0 and "nemori:" not in result.stderr
