"""The core context (retrieval/core.py), the answer over it (core_answer.py), the answer fixes, and the saved KV states (fake LLM and embedder)."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest

from nemori_cli.domain import Hit, IncomingMessage, Message
from nemori_cli.embed.base import Deferred
from nemori_cli.llm import state_files
from nemori_cli.llm.prefix_states import PrefixStates, Snapshot
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.prompts import core as core_prompt
from nemori_cli.retrieval import answer_fixes, core_answer
from nemori_cli.retrieval import core as core_memory
from nemori_cli.retrieval.core_cache import CoreCache, Head
from nemori_cli.retrieval.search import PROFILES
from nemori_cli.store import facts as fact_sql
from tests.support.scripted import scripted

T0 = datetime(2024, 3, 4, 9, 0)


def _chat(n: int = 6, start: datetime = T0) -> list[IncomingMessage]:
    lines = [
        ("Priya", "I went to the climbing gym yesterday with Maya."),
        ("Sam", "Nice! I have news too."),
        ("Sam", "Quick update: I decided to accept the Northwind offer"),
        ("Priya", "Congratulations, when do you start?"),
        ("Sam", "In April, after my trip to Lisbon."),
        ("Priya", "My violin lesson is on Friday."),
    ]
    out = []
    for i in range(n):
        speaker, content = lines[i % len(lines)]
        out.append(
            IncomingMessage(
                speaker=speaker,
                content=f"{content}" if i < len(lines) else f"{content} ({i})",
                timestamp=start + timedelta(minutes=i),
                source_id=f"m{i}",
                session="s1",
            )
        )
    return out


def _hamster() -> list[IncomingMessage]:
    """One line a month older than the chat: beyond a small core, found only by retrieval."""
    return [
        IncomingMessage(
            speaker="Ann", content="My hamster is called Biscuit.", timestamp=T0 - timedelta(days=30), source_id="old", session="s0"
        )
    ]


def _ingest(db, llm, backend, embedder, messages, facts=None):
    scripted(backend, facts=facts if facts is not None else [[]])
    pipe = Pipeline(db, "u", llm, embedder)
    pipe.add_messages(messages)
    pipe.process(flush=True)


def _answering(backend, text: str):
    """The model answers every question with ``text``; the prompts it saw are in backend.history."""
    backend.default = lambda messages, schema: {"answer": text}


class NoEmbedder:
    """Fails the test if anything embeds."""

    def __call__(self):
        raise AssertionError("the embedder was loaded although the core holds everything")


# -- the core -------------------------------------------------------------


def test_the_core_is_the_whole_history_when_it_fits(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder, _chat())
    core = core_memory.build(db, "u", 4000)
    assert core.complete and core.holds_everything
    assert [h.text for h in core.turns] == [m.content for m in _chat()]
    assert "The whole conversation, oldest first:" in core.text and core.text.endswith("\n")
    assert "4 March 2024:" in core.text and "[3 March 2024]" in core.text  # dated, relative words resolved


def test_a_small_budget_keeps_the_newest_turns_and_says_it_is_not_the_whole(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder, _chat(40))
    core = core_memory.build(db, "u", 120)
    assert not core.complete and 0 < len(core.turns) < 40
    ids = sorted(m.id for m in _all(db))
    assert [h.id for h in core.turns] == ids[-len(core.turns) :]  # the most recent, oldest first
    assert "The most recent part of the conversation" in core.text


def test_a_core_beyond_the_window_starts_at_a_step_and_grows_at_its_end(db, llm, backend, embedder):
    """New turns extend the same core (its saved state is extended, not read again) until the start moves a whole step."""
    from nemori_cli.store import messages as message_sql

    budget = 700
    every = core_memory.step(int(budget / core_memory.COUNT_SLACK))
    assert every > 1
    _ingest(db, llm, backend, embedder, _chat(120))
    previous = core_memory.build(db, "u", budget)
    assert not previous.complete
    extended = moved = 0
    for i in range(3 * every):
        with db.transaction():
            message_sql.insert_messages(
                db,
                "u",
                [
                    IncomingMessage(
                        speaker="Sam",
                        content=f"One more line, number {i}.",
                        timestamp=T0 + timedelta(hours=3, minutes=i),
                        source_id=f"n{i}",
                        session="s2",
                    )
                ],
            )
        core = core_memory.build(db, "u", budget)
        ids = [m.id for m in _all(db)]
        first = ids.index(core.turns[0].id)
        assert first % every == 0 and [h.id for h in core.turns] == ids[first:]  # a step's start, then every newer turn
        if core.turns[0].id == previous.turns[0].id:
            assert core.text.startswith(previous.text)  # the old core's text, then the new line
            extended += 1
        else:
            assert ids.index(core.turns[0].id) - ids.index(previous.turns[0].id) == every  # moved by one whole step
            moved += 1
        previous = core
    assert moved >= 1 and extended >= 2 * every - 2


def _all(db):
    from nemori_cli.store import messages as message_sql

    return message_sql.all_messages(db, "u")


def _old_then_new(db, llm, backend, embedder, facts):
    old = [
        IncomingMessage(
            speaker="Sam",
            content=f"I work at Northwind now, note {i}.",
            timestamp=T0 - timedelta(days=30, minutes=-i),
            source_id=f"o{i}",
            session="s0",
        )
        for i in range(3)
    ]
    _ingest(db, llm, backend, embedder, old + _chat(40), facts=facts)


def test_the_core_shows_the_current_facts_of_what_its_turns_no_longer_show(db, llm, backend, embedder):
    _old_then_new(db, llm, backend, embedder, [["Sam writes a note.", "Sam works at Northwind now."], ["Priya climbs with Maya."]])
    facts = fact_sql.list_all(db, "u")
    with db.transaction():
        fact_sql.supersede(db, "u", [facts[0].id], facts[1].id, "test")
    core = core_memory.build(db, "u", 300)
    assert not core.complete
    assert "Sam works at Northwind now." in [h.text for h in core.facts]
    assert "Facts known now:" in core.text and "writes a note" not in core.text  # the superseded one left out
    oldest = core.turns[0].start
    assert all(h.end < oldest for h in core.facts)  # a fact of turns the core shows adds nothing to them


def test_a_core_that_holds_the_whole_history_has_no_facts(db, llm, backend, embedder):
    _old_then_new(db, llm, backend, embedder, [["Sam works at Northwind now."]])
    core = core_memory.build(db, "u", 8000)
    assert core.complete and core.facts == () and "Facts known now" not in core.text


def test_the_core_of_a_moment_holds_nothing_said_after_it(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder, _chat())
    core = core_memory.build(db, "u", 4000, as_of=T0 + timedelta(minutes=2, seconds=30))
    assert [h.text for h in core.turns] == [m.content for m in _chat()[:3]]


def test_the_core_digest_changes_with_the_memory(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder, _chat(3))
    first = core_memory.build(db, "u", 4000)
    assert core_memory.build(db, "u", 4000).digest == first.digest  # the same memory, the same core
    _ingest(db, llm, backend, embedder, _chat(6))
    assert core_memory.build(db, "u", 4000).digest != first.digest


# -- the answer over it -----------------------------------------------------


def test_every_question_shares_the_core_as_its_prompt_prefix(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder, _chat())
    _answering(backend, "Maya")
    sizes = core_answer.CoreBudget(4000)
    for q in ("Who did Priya climb with?", "What did Sam decide about the offer?"):
        core_answer.ask(db, "u", Deferred(NoEmbedder()), llm, q, PROFILES["core"], sizes=sizes)
    prompts = backend.prompts_for("Answer")
    core = core_memory.build(db, "u", 4000)
    assert len(prompts) == 2
    for p in prompts:
        assert p[0]["content"] == core_prompt.SYSTEM
        assert p[1]["content"].startswith(core.text)  # the cached prefix, unchanged
    assert prompts[0][1]["content"].endswith("Question: Who did Priya climb with?")


def test_a_core_holding_everything_answers_without_the_embedder(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder, _chat())
    _answering(backend, "Maya")
    answer = core_answer.ask(
        db, "u", Deferred(NoEmbedder()), llm, "Who did Priya climb with?", PROFILES["core"], sizes=core_answer.CoreBudget(4000)
    )
    assert answer.answer == "Maya" and not answer.abstained


def test_retrieval_adds_older_turns_and_never_repeats_the_core(db, llm, backend, embedder):
    old = _hamster()
    _ingest(db, llm, backend, embedder, old + _chat(40))
    _answering(backend, "Biscuit")
    sizes = core_answer.CoreBudget(150, tail=400)
    core = core_memory.build(db, "u", sizes.core)
    assert "Biscuit" not in core.text
    core_answer.ask(db, "u", embedder, llm, "What is the hamster called?", PROFILES["core"], sizes=sizes)
    prompt = backend.prompts_for("Answer")[-1][1]["content"]
    tail = prompt[len(core.text) :]
    assert tail.startswith(core_prompt.TAIL_HEADING) and "Biscuit" in tail
    for h in core.turns:
        assert f'"{h.text}"' not in tail  # a turn the core shows is not shown again


def test_the_lean_road_reads_a_small_core_and_gives_the_rest_to_the_question(db, llm, backend, embedder):
    old = _hamster()
    _ingest(db, llm, backend, embedder, old + _chat(40))
    _answering(backend, "Biscuit")
    full = core_answer.CoreBudget(600, tail=10)
    lean = core_answer.CoreBudget(600, tail=10, beyond="lean", lean=80, lean_tail=400)
    big = core_answer.build_core(db, "u", llm, full, PROFILES["core"])
    small = core_answer.build_core(db, "u", llm, lean, PROFILES["core"])
    assert not big.holds_everything and len(small.turns) < len(big.turns) and small.tokens <= 80
    assert small.turns[-1].id == big.turns[-1].id  # the newest turns, as the full core has them
    assert core_answer.reads_core(small, lean) and core_answer.beyond_tail(small, lean) == 400
    core_answer.ask(db, "u", embedder, llm, "What is the hamster called?", PROFILES["core"], sizes=lean)
    prompt = backend.prompts_for("Answer")[-1][1]["content"]
    assert prompt.startswith(small.text) and "Biscuit" in prompt[len(small.text) :]
    # Where the whole history fits, the lean road is the core road: the whole history, nothing retrieved.
    roomy = core_answer.CoreBudget(40000, beyond="lean", lean=80)
    assert core_answer.build_core(db, "u", llm, roomy, PROFILES["core"]).holds_everything


def test_a_question_no_message_speaks_of_is_not_mentioned_without_the_model(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder, _chat())
    before = len(backend.history)
    answer = core_answer.ask(
        db, "u", Deferred(NoEmbedder()), llm, "What colour is the submarine?", PROFILES["core"], sizes=core_answer.CoreBudget(4000)
    )
    assert answer.abstained and len(backend.history) == before


def test_a_copied_first_person_line_is_said_of_its_speaker(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder, _chat())
    _answering(backend, "Quick update: I decided to accept the Northwind offer")
    answer = core_answer.ask(
        db,
        "u",
        Deferred(NoEmbedder()),
        llm,
        "What did Sam decide about the job offer?",
        PROFILES["core"],
        sizes=core_answer.CoreBudget(4000),
    )
    assert answer.answer == "Sam decided to accept the Northwind offer"


def test_a_when_answer_names_the_day_of_the_event_not_of_the_line(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder, _chat())
    _answering(backend, "4 March 2024, with Maya")
    answer = core_answer.ask(
        db, "u", Deferred(NoEmbedder()), llm, "When did Priya go to the climbing gym?", PROFILES["core"], sizes=core_answer.CoreBudget(4000)
    )
    assert answer.answer == "3 March 2024, with Maya"


# -- the fixes alone ---------------------------------------------------------


def _msg(i: int, speaker: str, content: str, at: datetime = T0) -> Message:
    return Message(id=i, user="u", key=f"k{i}", speaker=speaker, content=content, timestamp=at, source_id=None, session="s1")


@pytest.mark.parametrize(
    "answer, expected",
    [
        ("I decided to accept the Northwind offer", "Sam decided to accept the Northwind offer"),
        ("I'm moving to Lisbon with my sister next year!", "Sam is moving to Lisbon with Sam's sister next year"),
        ("the Northwind offer", "the Northwind offer"),  # a phrase taken from the line, not the line
    ],
)
def test_uncopied(answer, expected):
    said = [
        _msg(1, "Sam", "Quick update: I decided to accept the Northwind offer"),
        _msg(2, "Sam", "I'm moving to Lisbon with my sister next year!"),
    ]
    assert answer_fixes.uncopied(answer, said) == expected


def test_an_answer_that_copies_no_line_is_kept_as_it_is():
    said = [_msg(1, "Sam", "I decided to accept the Northwind offer")]
    assert answer_fixes.uncopied("I think Sam accepted an offer from a company", said) == "I think Sam accepted an offer from a company"
    assert answer_fixes.copied_line("Sam accepted the offer", said) is None


def test_event_day_leaves_other_questions_and_other_days_alone():
    turn = _msg(1, "Priya", "I went to the gym yesterday")
    ranked = [Hit(kind="message", id=1, score=1.0, title="Priya", text=turn.content, start=T0, end=T0, messages=(turn,))]
    assert answer_fixes.event_day("4 March 2024", "When did Priya go to the gym?", ranked) == "3 March 2024"
    assert answer_fixes.event_day("4 March 2024", "Who went to the gym?", ranked) == "4 March 2024"
    assert answer_fixes.event_day("1 March 2024", "When did Priya go to the gym?", ranked) == "1 March 2024"


# -- the best-matching lines shown again ----------------------------------------

LONG = (
    "We spent the whole weekend at the lake with the kids, and on Sunday morning I finally "
    "ran a charity race for mental health last Saturday [20 May 2023] which felt great, then we drove home late."
)


def test_a_long_line_is_cut_to_the_words_around_the_question():
    wanted = frozenset(w[: core_prompt.STEM] for w in ("charity", "race"))
    cut = core_prompt.around(LONG, wanted, width=12)
    assert "charity race" in cut and cut.startswith("… ") and cut.endswith(" …")
    assert len(cut.replace("…", "").split()) <= 12 + 2  # the annotation is one word of the 12
    assert "[20 May 2023]" in cut  # a relative word's date is never split


def test_an_annotation_is_never_split_at_the_window_edge():
    wanted = frozenset({"race"})
    for width in range(3, 20):
        cut = core_prompt.around(LONG, wanted, width=width)
        assert cut.count("[") == cut.count("]"), (width, cut)


def test_a_short_line_and_a_line_without_the_question_words_keep_their_start():
    assert core_prompt.around("Nice! Which gym?", frozenset({"gym"}), width=12) == "Nice! Which gym?"
    plain = LONG.replace(" [20 May 2023]", "")
    assert core_prompt.around(plain, frozenset({"zebra"}), width=5) == "We spent the whole weekend …"
    # a line whose only match is a relative word's date is shown around that date
    assert "[20 May 2023]" in core_prompt.around(LONG, frozenset({"zebra"}), width=5)


def test_focus_lines_are_whole_without_the_question_words():
    m = _msg(1, "Melanie", LONG)
    hit = Hit(kind="message", id=1, score=1.0, title="Melanie", text=LONG, start=T0, end=T0, messages=(m,))
    assert "drove home late" in core_prompt.focus_lines([hit])
    assert "drove home late" not in core_prompt.focus_lines([hit], frozenset({"chari", "race"}), 12)


def _ask_hamster(db, llm, embedder, **roads):
    """core_answer.ask of _hamster()'s question, with the sizes and callbacks a test sets."""
    return core_answer.ask(db, "u", embedder, llm, "What is the hamster called?", PROFILES["core"], **roads)


def test_beyond_the_window_a_core_costly_to_read_is_left_for_the_short_road(db, llm, backend, embedder):
    old = _hamster()
    _ingest(db, llm, backend, embedder, old + _chat(40))
    _answering(backend, "Biscuit")
    sizes = core_answer.CoreBudget(150, tail=10)
    prepared: list = []
    costs = {"cold": core_answer.COLD_CORE_TOKENS + 1, "saved": 0}
    for state, cost in costs.items():
        answer = _ask_hamster(db, llm, embedder, sizes=sizes, prepare=prepared.append, to_read=lambda core, cost=cost: cost)
        assert answer.answer == "Biscuit"
        prompt = backend.prompts_for("Answer")[-1][1]["content"]
        core = core_memory.build(db, "u", sizes.core)
        if state == "cold":  # the question's own context, no core read, and the reason logged
            assert not prepared and not prompt.startswith(core.text) and "Biscuit" in prompt
            assert any("not saved" in e.detail for e in llm.log.events if e.kind == "decision")
        else:  # a saved core is read as before
            assert len(prepared) == 1 and prompt.startswith(core.text)


def test_the_short_road_holds_its_instructions_head_and_its_prompt_begins_with_it(db, llm, backend, embedder):
    from nemori_cli.prompts import answer as answer_prompt

    _ingest(db, llm, backend, embedder, _hamster() + _chat(40))
    _answering(backend, "Biscuit")
    heads: list = []
    answer = _ask_hamster(
        db,
        llm,
        embedder,
        sizes=core_answer.CoreBudget(150, tail=10),
        prepare=lambda core: pytest.fail("the short road reads no core"),
        to_read=lambda core: core_answer.COLD_CORE_TOKENS + 1,
        prepare_head=heads.append,
    )
    assert answer.answer == "Biscuit" and len(heads) == 1
    prompt = backend.prompts_for("Answer")[-1]
    head = heads[0].prefix
    # The head is the prompt's start, so a state holding it serves the whole prompt.
    assert head == answer_prompt.timeline_head() and prompt[0] == head[0]
    assert prompt[1]["content"].startswith(head[1]["content"]) and len(prompt[1]["content"]) > len(head[1]["content"])


def test_the_short_road_reads_facts_only_when_asked_for(db, llm, backend, embedder):
    """Beyond the window raw turns alone (sixth round), unless the options ask for facts there (`ask --facts N`)."""
    from dataclasses import replace

    _ingest(db, llm, backend, embedder, _hamster() + _chat(40), facts=[["Ann's hamster is called Biscuit."]])
    assert fact_sql.list_all(db, "u")
    _answering(backend, "Biscuit")
    sizes = core_answer.CoreBudget(150, tail=10, beyond="short")
    kinds = {}
    for name, options in {"default": PROFILES["core"], "asked": replace(PROFILES["core"], facts=5, facts_beyond=True)}.items():
        answer = core_answer.ask(db, "u", embedder, llm, "What is the hamster called?", options, sizes=sizes)
        kinds[name] = {h.kind for h in answer.hits}
        prompt = backend.prompts_for("Answer")[-1][1]["content"]
        assert ("Ann's hamster is called Biscuit." in prompt) == (name == "asked")
    assert kinds == {"default": {"message"}, "asked": {"message", "fact"}}


def test_a_head_is_saved_beside_the_core_and_leaves_the_core_report_alone(tmp_path, llm):
    cache = CoreCache(tmp_path / "db.kv")
    head = Head.of([{"role": "system", "content": "instructions"}, {"role": "user", "content": "Memories:\n"}])
    assert cache.path("u", "small", head.slot) != cache.path("u", "small")
    assert cache.path("u", "small", head.slot).name.startswith(cache.path("u", "small").stem)  # forget's prefix covers it
    assert head.digest == Head.of(head.prefix).digest != Head.of([{"role": "system", "content": "other"}]).digest
    cache.last = None
    assert cache.prepare(llm, "u", head).outcome == "none"  # an endpoint here: nothing to hold
    assert cache.last is None  # `ask --json`'s "core" stays the core's
    state_files.save(cache.path("u", "small", head.slot), _snapshot(), {}, head.digest)
    assert cache.forget("u") == 1


def test_a_core_that_holds_everything_is_read_however_cold(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder, _chat())
    _answering(backend, "Maya")
    prepared: list = []
    core_answer.ask(
        db,
        "u",
        Deferred(NoEmbedder()),
        llm,
        "Who did Priya climb with?",
        PROFILES["core"],
        sizes=core_answer.CoreBudget(4000),
        prepare=prepared.append,
        to_read=lambda core: 10**6,
    )
    assert len(prepared) == 1  # where the history fits, the core is the answer's whole context


# -- the saved state ------------------------------------------------------------


def _snapshot(key="k") -> Snapshot:
    return Snapshot(key, np.arange(5, dtype=np.intc), b"state-bytes" * 10)


def test_a_saved_state_loads_only_for_the_same_identity_and_digest(tmp_path):
    path = tmp_path / "u.kv"
    state_files.save(path, _snapshot(), {"model": "m", "n_ctx": 8192}, "d1")
    got = state_files.load(path, "k", {"model": "m", "n_ctx": 8192}, "d1")
    assert got is not None and got.state == _snapshot().state and list(got.tokens) == [0, 1, 2, 3, 4]
    assert state_files.load(path, "k", {"model": "m", "n_ctx": 4096}, "d1") is None  # other settings
    assert state_files.load(path, "k", {"model": "m", "n_ctx": 8192}, "d2") is None  # another core
    path.write_bytes(path.read_bytes()[:-7])  # cut short
    assert state_files.load(path, "k", {"model": "m", "n_ctx": 8192}, "d1") is None
    path.write_bytes(b"not a state file")
    assert state_files.load(path, "k", {"model": "m", "n_ctx": 8192}, "d1") is None


def test_saved_tokens_reads_the_ids_without_the_state_and_only_for_the_same_identity(tmp_path):
    path = tmp_path / "u.kv"
    state_files.save(path, _snapshot(), {"model": "m"}, "d1")
    digest, ids = state_files.saved_tokens(path, {"model": "m"})
    assert digest == "d1" and list(ids) == [0, 1, 2, 3, 4]
    assert state_files.saved_tokens(path, {"model": "other"}) is None
    assert state_files.saved_tokens(tmp_path / "none.kv", {"model": "m"}) is None
    path.write_bytes(path.read_bytes()[: len(state_files.MAGIC) + 20])  # the header cut
    assert state_files.saved_tokens(path, {"model": "m"}) is None


def test_an_endpoint_has_no_read_cost(llm):
    core = core_memory.Core("x\n", (), (), True, True, 1)
    assert CoreCache(None).to_read(llm, "u", core) is None


def test_forget_removes_every_saved_state_of_the_user_and_no_other(tmp_path):
    cache = CoreCache(tmp_path / "db.kv")
    for user, model in (("u", "small"), ("u", "base"), ("v", "small")):
        state_files.save(cache.path(user, model), _snapshot(), {}, "d")
    assert cache.forget("u") == 2
    assert not cache.path("u", "small").exists() and cache.path("v", "small").exists()


def test_an_endpoint_needs_no_state(llm):
    cache = CoreCache(None)
    core = core_memory.Core("x\n", (), (), True, True, 1)
    assert cache.prepare(llm, "u", core).outcome == "none"


class _FakeLlama:
    """Just enough of a llama for PrefixStates' bookkeeping (no real KV state)."""


def test_a_pinned_snapshot_outlives_the_longer_prompts_that_follow_it():
    states = PrefixStates(_FakeLlama())
    states.enabled = True
    states._capture = lambda key: Snapshot(key, np.zeros(1, dtype=np.intc), b"x")
    states.after("core")
    states.pin("core")
    states.after("core + question 1")
    states.after("core + question 1 + more")
    assert "core" in states.snapshots and "core + question 1" not in states.snapshots
    states.slots = 1
    states.after("other")
    assert "core" in states.snapshots  # eviction passes it over


def test_the_budget_leaves_room_for_the_answer_and_the_tail():
    sizes = core_answer.budget_for(8192)
    assert sizes.core + sizes.tail + core_answer.ANSWER_TOKENS < 8192
    assert core_answer.budget_for(100).core == 256  # never below a floor
