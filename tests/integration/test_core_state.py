"""The core context's KV state with the real llama.cpp and the real CLI: saved by ingest, loaded by a fresh `ask`, never used stale."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.integration.conftest import EXAMPLE, run_nemori

pytestmark = pytest.mark.integration

QUESTION = "Who did Priya go climbing with?"


# A core, and the same core grown by three turns (an appending ingest).
HEAD = "The whole conversation, oldest first:\n4 March 2024:\n" + "".join(
    f'- Priya: "I went climbing with Maya at Granite Works, visit {i}."\n' for i in range(12)
)
GROWN = HEAD + "5 March 2024:\n" + "".join(f'- Sam: "I moved to Lisbon, day {i}."\n' for i in range(3))


def _fresh_process(backend) -> None:
    """Another process, as far as the model is concerned: nothing held in memory, no KV cache."""
    backend.states.snapshots.clear()
    backend.states.pinned.clear()
    backend.llama.reset()
    backend.llama._ctx.kv_cache_clear()


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    from nemori_cli.config import load_presets
    from nemori_cli.llm.llamacpp import LlamaCppBackend
    from nemori_cli.modelfiles import gguf_path

    preset = load_presets().llms["tiny"]
    return LlamaCppBackend(gguf_path(preset, tmp_path_factory.mktemp("c")), name="tiny", n_ctx=2048)


def _core_messages(text: str):
    from nemori_cli.prompts import core as core_prompt

    return core_prompt.prefix(text)


def test_a_saved_state_answers_exactly_as_reading_the_prefix_again(backend, tmp_path):
    from nemori_cli.llm.base import StructuredLLM
    from nemori_cli.prompts import answer as answer_prompt
    from nemori_cli.prompts import core as core_prompt
    from nemori_cli.retrieval.core import Core
    from nemori_cli.retrieval.core_cache import CoreCache
    from nemori_cli.stages import ANSWER

    text = "The whole conversation, oldest first:\n4 March 2024:\n" + "".join(
        f'- Priya: "I went climbing with Maya at Granite Works, visit {i}."\n' for i in range(12)
    )
    core = Core(text, (), (), True, True, 300)
    llm = StructuredLLM(backend)
    question = core_prompt.render(text, QUESTION, [], now=None, arithmetic=[])
    schema = answer_prompt.timeline_schema(False)

    cache = CoreCache(tmp_path / "db.kv")
    assert cache.prepare(llm, "u", core).outcome == "built"
    assert cache.path("u", "tiny").exists()
    before = backend.tokens_read
    warm = llm.complete(question, schema=schema, stage=ANSWER).value.answer
    read_warm = backend.tokens_read - before

    # Another "process": nothing in memory, the state comes from the file.
    backend.states.snapshots.clear()
    backend.llama.reset()
    backend.llama._ctx.kv_cache_clear()
    assert cache.prepare(llm, "u", core).outcome == "loaded"
    before = backend.tokens_read
    loaded = llm.complete(question, schema=schema, stage=ANSWER).value.answer
    read_loaded = backend.tokens_read - before

    # And with no state at all: the whole prompt read.
    backend.states.snapshots.clear()
    backend.states.pinned.clear()
    backend.llama.reset()
    backend.llama._ctx.kv_cache_clear()
    before = backend.tokens_read
    cold = llm.complete(question, schema=schema, stage=ANSWER).value.answer
    read_cold = backend.tokens_read - before

    assert warm == loaded == cold
    assert read_loaded == read_warm < read_cold / 3  # only the question's part is read after a load


def test_a_grown_core_extends_the_saved_state_of_the_old_one_and_answers_as_if_read_whole(backend, tmp_path):
    from nemori_cli.llm.base import StructuredLLM
    from nemori_cli.prompts import answer as answer_prompt
    from nemori_cli.prompts import core as core_prompt
    from nemori_cli.retrieval.core import Core
    from nemori_cli.retrieval.core_cache import CoreCache
    from nemori_cli.stages import ANSWER

    head, grown = HEAD, GROWN
    llm = StructuredLLM(backend)
    cache = CoreCache(tmp_path / "db.kv")
    _fresh_process(backend)
    assert cache.prepare(llm, "u", Core(head, (), (), True, True, 300)).outcome == "built"

    _fresh_process(backend)
    prepared = cache.prepare(llm, "u", Core(grown, (), (), True, True, 360))
    assert prepared.outcome == "extended" and 0 < prepared.read < prepared.tokens / 3, prepared
    question = core_prompt.render(grown, QUESTION, [], now=None, arithmetic=[])
    schema = answer_prompt.timeline_schema(False)
    extended = llm.complete(question, schema=schema, stage=ANSWER).value.answer

    _fresh_process(backend)
    assert cache.prepare(llm, "u", Core(grown, (), (), True, True, 360)).outcome == "loaded"  # the grown state was saved
    _fresh_process(backend)
    (tmp_path / "db.kv").joinpath(cache.path("u", "tiny").name).unlink()
    cold = llm.complete(question, schema=schema, stage=ANSWER).value.answer
    assert extended == cold

    # A core that shares only the system message with the saved one is read (almost) whole: built, not extended.
    _fresh_process(backend)
    cache.prepare(llm, "u", Core(head, (), (), True, True, 300))
    _fresh_process(backend)
    facts = "Facts known now:\n" + "".join(f"- (1 May 2024) Ann sails boat number {i} to Malta.\n" for i in range(30))
    other = cache.prepare(llm, "u", Core(facts, (), (), True, True, 400))
    assert other.outcome == "built" and other.read > 0


def test_a_state_of_other_settings_or_bytes_is_rebuilt_never_used(backend, tmp_path):
    from nemori_cli.llm import state_files
    from nemori_cli.llm.base import StructuredLLM
    from nemori_cli.retrieval.core import Core
    from nemori_cli.retrieval.core_cache import CoreCache

    llm = StructuredLLM(backend)
    core = Core("Facts known now:\n- (1 May 2024) Ann sails.\n", (), (), True, True, 20)
    cache = CoreCache(tmp_path / "db.kv")
    backend.states.snapshots.clear()
    assert cache.prepare(llm, "u", core).outcome == "built"
    path = cache.path("u", "tiny")

    # Saved under other settings (another n_ctx): not loaded, built again and saved over it.
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b'"n_ctx": 2048', b'"n_ctx": 4096', 1))
    backend.states.snapshots.clear()
    assert cache.prepare(llm, "u", core).outcome == "built"
    assert b'"n_ctx": 2048' in path.read_bytes()

    # The right header over bytes llama.cpp cannot use: refused, built again.
    header_end = raw.index(b"\n", len(state_files.MAGIC)) + 1
    tokens = json.loads(raw[len(state_files.MAGIC) : header_end])["tokens"]
    body_start = header_end + 4 * tokens
    path.write_bytes(raw[:body_start] + b"\x00" * (len(raw) - body_start))
    backend.states.snapshots.clear()
    assert cache.prepare(llm, "u", core).outcome == "built"
    assert path.read_bytes() == raw or len(path.read_bytes()) == len(raw)


def test_ingest_saves_the_core_and_a_fresh_ask_loads_it(tmp_path, cache_dir):
    db = tmp_path / "demo.db"
    env = {"NEMORI_CACHE_DIR": str(cache_dir)}
    proc = run_nemori("ingest", str(EXAMPLE), "--db", str(db), "--json", env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    report = json.loads(proc.stdout)
    assert report["core"]["outcome"] == "built" and report["core"]["whole_history"] and report["core"]["saved_bytes"] > 0
    states = list((tmp_path / "demo.db.kv").glob("*.kv"))
    assert len(states) == 1

    stamp = states[0].stat().st_mtime_ns
    proc = run_nemori("ask", QUESTION, "--db", str(db), "--json", env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    answer = json.loads(proc.stdout)
    assert answer["core"]["outcome"] == "loaded"  # read from the file, not computed again
    assert states[0].stat().st_mtime_ns == stamp

    # The memory changes: the next ask builds a new state, never the old one.
    more = tmp_path / "more.jsonl"
    more.write_text(
        json.dumps({"id": "x1", "speaker": "Priya", "content": "Maya and I went climbing again today.", "timestamp": "2024-05-01T10:00:00"})
        + "\n"
    )
    proc = run_nemori("ingest", str(more), "--db", str(db), "--json", env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    grown = json.loads(proc.stdout)["core"]
    # the old core's saved state is extended by the new turn alone, not read again
    assert grown["outcome"] == "extended" and 0 < grown["read"] < grown["tokens"] / 4, grown
    proc = run_nemori("ask", QUESTION, "--db", str(db), "--json", env=env)
    assert json.loads(proc.stdout)["core"]["outcome"] == "loaded"  # ingest saved the new one

    # A copy of the file without its states: the first ask computes the state, then saves it.
    copy = tmp_path / "b.db"
    shutil.copy(db, copy)
    proc = run_nemori("ask", QUESTION, "--db", str(copy), "--json", env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["core"]["outcome"] == "built"
    assert list((tmp_path / "b.db.kv").glob("*.kv"))

    # forget user removes the saved state with the rest.
    assert run_nemori("forget", "user", "default", "--yes", "--db", str(db), env=env).returncode == 0
    assert not list((tmp_path / "demo.db.kv").glob("*.kv"))


def test_what_holding_a_core_costs_is_told_before_reading_it(backend, tmp_path):
    """`ask` leaves a core unread beyond the window when holding it would read more than COLD_CORE_TOKENS (core_answer)."""
    from nemori_cli.llm.base import StructuredLLM
    from nemori_cli.retrieval.core import Core
    from nemori_cli.retrieval.core_cache import CoreCache

    head, grown = HEAD, GROWN
    llm = StructuredLLM(backend)
    cache = CoreCache(tmp_path / "db.kv")
    old, new = Core(head, (), (), True, True, 300), Core(grown, (), (), True, True, 360)
    _fresh_process(backend)
    whole = len(backend.prefix_tokens(old.prefix))
    assert cache.to_read(llm, "u", old) == whole > 100  # nothing saved: every token
    cache.prepare(llm, "u", old)
    assert cache.to_read(llm, "u", old) == 0  # live
    _fresh_process(backend)
    assert cache.to_read(llm, "u", old) == 0  # saved for this very core
    lacking = cache.to_read(llm, "u", new)
    assert 0 < lacking < whole / 3  # a grown core: only what the saved one lacks
    assert cache.prepare(llm, "u", new).read == lacking  # what prepare then reads


def test_a_saved_head_is_loaded_by_the_next_process_which_answers_the_same_reading_less(backend, tmp_path):
    """The short road's instructions (core_cache.Head): read and saved by the first process, loaded by the next."""
    from nemori_cli.llm.base import StructuredLLM
    from nemori_cli.prompts import answer as answer_prompt
    from nemori_cli.retrieval.core_cache import CoreCache, Head
    from nemori_cli.stages import ANSWER

    system, user = answer_prompt.timeline_head()
    memories = "".join(f'(4 March 2024) Priya: "I went climbing with Maya at Granite Works, visit {i}."\n' for i in range(3))
    prompt = [system, {"role": "user", "content": f"{user['content']}{memories}\nQuestion: {QUESTION}"}]
    schema = answer_prompt.timeline_schema(False)
    llm = StructuredLLM(backend)
    cache = CoreCache(tmp_path / "db.kv")
    head = Head.of(answer_prompt.timeline_head())
    runs = []
    for expected in ("built", "loaded"):
        _fresh_process(backend)
        assert cache.prepare(llm, "u", head).outcome == expected
        before = backend.tokens_read
        answer = llm.complete(prompt, schema=schema, stage=ANSWER).value.answer
        runs.append((answer, backend.tokens_read - before))
    assert cache.path("u", "tiny", "head").exists() and not cache.path("u", "tiny").exists()
    (first, read_first), (second, read_second) = runs
    whole = len(backend.prefix_tokens(prompt))
    held = len(backend.prefix_tokens(head.prefix))
    assert first == second and read_first == read_second < whole - held + 8  # only what follows the head is read


@pytest.mark.parametrize("form", ["quote", "question-first"])
def test_each_answer_form_keeps_its_own_head_and_the_real_model_answers_in_its_shape(form, backend, tmp_path):
    """SearchOptions.answer_form with real llama.cpp: the grammar of `{"quote", "answer"}` parses, each form's head is
    saved in its own file beside the shipped one's, and a fresh process that loads it reads only what follows it."""
    from datetime import datetime

    from nemori_cli.llm.base import StructuredLLM
    from nemori_cli.prompts import answer as answer_prompt
    from nemori_cli.retrieval.answer import Layout, answer_hits
    from nemori_cli.retrieval.core_cache import CoreCache, Head
    from tests.support.windows import window

    hits = window("Priya", ["Morning!", "I went climbing with Maya at Granite Works.", "My arms hurt now."], datetime(2024, 3, 4, 10))
    llm = StructuredLLM(backend)
    cache = CoreCache(tmp_path / "db.kv")
    shipped, own = (
        Head.of(answer_prompt.timeline_head()),
        Head.of(answer_prompt.timeline_head(form=form), slot=answer_prompt.head_slot(form=form)),
    )
    runs = []
    for expected in ("built", "loaded"):
        _fresh_process(backend)
        assert cache.prepare(llm, "u", shipped).outcome == expected
        _fresh_process(backend)
        assert cache.prepare(llm, "u", own).outcome == expected  # its own file: the shipped head's did not stand in
        before = backend.tokens_read
        answer = answer_hits(llm, QUESTION, hits, Layout("timeline", form=form))
        runs.append((answer, backend.tokens_read - before))
        assert not answer.failed and answer.answer.strip(), answer  # the model's JSON parsed into an answer
    assert cache.path("u", "tiny", "head").exists() and cache.path("u", "tiny", own.slot).exists() and own.slot != "head"
    (first, read_first), (second, read_second) = runs
    assert first.answer == second.answer and read_first == read_second  # a loaded head answers as a read one
    prompt = answer_prompt.render_timeline(QUESTION, hits, now=None, arithmetic=[], form=form)
    held = len(backend.prefix_tokens(own.prefix))
    assert read_second < len(backend.prefix_tokens(prompt)) - held + 8  # only what follows the head is read
    if form == "quote":
        unquoted = json.dumps({"quote": "", "answer": second.answer})
        assert second.usage.completion_tokens > len(backend.llama.tokenize(unquoted.encode(), add_bos=False))  # words were quoted
