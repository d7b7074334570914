"""The eighth round's options for the short road, all off by default: its timeline in blocks, the best-ranked read
last (SearchOptions.timeline_order = "best-last"), a found turn's own count of turns before it (turns_before), and a
cap on windows per chat session (session_windows; the budget's own test is in test_answer_context.py), each offered
as bench rows.

The shipped order stays one timeline, oldest first; these tests hold what the
other order promises: the same lines, each once, in the better-ranked block,
every block under its date, the best next to the question, and its own
instructions with their own saved-state file.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemori_cli.bench import catalog
from nemori_cli.domain import Hit, Message
from nemori_cli.errors import ConfigError
from nemori_cli.prompts import answer as answer_prompt
from nemori_cli.prompts import timeline
from nemori_cli.retrieval.answer import Layout, answer_hits, layout_of
from nemori_cli.retrieval.search import PROFILES

MAY = datetime(2023, 5, 8, 13)


def _msg(i: int, when: datetime, text: str | None = None) -> Message:
    return Message(id=i, user="u", key=str(i), speaker="Ann", content=text or f"line {i}", timestamp=when, source_id=str(i), session="s")


def _window(i: int, score: float, messages: list[Message], similarity: float = 0.8) -> Hit:
    """A retrieved turn with its neighbours, as the short road keeps it (hits come best first)."""
    return Hit(
        kind="message", id=i, score=score, title="", text=messages[0].content, start=messages[0].timestamp,
        end=messages[-1].timestamp, messages=tuple(messages), similarity=similarity,
    )  # fmt: skip


def _three_windows() -> list[Hit]:
    early = [_msg(1, MAY), _msg(2, MAY + timedelta(minutes=1))]
    late = [_msg(10, MAY + timedelta(days=30)), _msg(11, MAY + timedelta(days=30, minutes=1))]
    middle = [_msg(2, MAY + timedelta(minutes=1)), _msg(3, MAY + timedelta(minutes=2))]  # shares line 2 with `early`
    return [_window(10, 0.05, late), _window(1, 0.04, early), _window(3, 0.03, middle)]  # best first: the newest


def test_best_last_reads_the_best_window_last_and_each_block_under_its_date():
    text = timeline.render(_three_windows(), order="best-last")
    lines = text.splitlines()
    assert lines == [
        "8 May 2023:",  # the third-ranked window, first; line 2 is in the second's block, not here
        '- Ann: "line 3"',
        "8 May 2023:",  # the same day named again: a block is read on its own
        '- Ann: "line 1"',
        '- Ann: "line 2"',
        "7 June 2023:",  # the best, next to the question
        '- Ann: "line 10"',
        '- Ann: "line 11"',
    ]


def test_the_shipped_order_is_still_one_timeline_oldest_first_with_each_day_named_once():
    lines = timeline.render(_three_windows()).splitlines()
    assert lines == [
        "8 May 2023:",
        '- Ann: "line 1"',
        '- Ann: "line 2"',
        '- Ann: "line 3"',
        "7 June 2023:",
        '- Ann: "line 10"',
        '- Ann: "line 11"',
    ]
    assert timeline.render(_three_windows(), order="time") == timeline.render(_three_windows())


_windows = st.lists(
    st.tuples(st.integers(0, 40), st.integers(1, 4)),  # (first message id, length): windows may overlap
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(_windows)
def test_both_orders_show_the_same_lines_each_once(spans):
    hits = []
    for rank, (first, length) in enumerate(spans):
        messages = [_msg(i, MAY + timedelta(hours=i)) for i in range(first, first + length)]
        hits.append(_window(first, 1.0 - rank * 0.01, messages))
    by_time = [line for line in timeline.render(hits).splitlines() if line.startswith("- ")]
    best_last = [line for line in timeline.render(hits, order="best-last").splitlines() if line.startswith("- ")]
    assert sorted(by_time) == sorted(best_last)
    assert len(set(best_last)) == len(best_last)
    # The best-ranked window keeps every one of its lines, in its own block, which comes last.
    first, length = spans[0]
    assert best_last[-length:] == [f'- Ann: "line {i}"' for i in range(first, first + length)]


def test_an_unknown_order_is_refused_by_the_renderer_and_by_the_options():
    from nemori_cli.services.answer import search_options

    with pytest.raises(ValueError, match="timeline order 'newest'"):
        timeline.render(_three_windows(), order="newest")
    with pytest.raises(ConfigError, match="timeline_order='newest'"):
        search_options("core", None, {"timeline_order": "newest"})
    assert search_options("core", None, {"timeline_order": "best-last"}).timeline_order == "best-last"


def test_best_last_has_its_own_instructions_and_its_own_saved_state_file():
    assert "oldest first" in answer_prompt.TIMELINE_SYSTEM
    assert "oldest first" not in answer_prompt.BEST_LAST_SYSTEM and "most relevant block last" in answer_prompt.BEST_LAST_SYSTEM
    assert answer_prompt.timeline_head()[0]["content"] == answer_prompt.TIMELINE_SYSTEM
    assert answer_prompt.head_slot() == "head" and answer_prompt.head_slot("best-last") != "head"


def test_the_answer_prompt_follows_the_options_order(llm, backend):
    assert layout_of(PROFILES["core"]).order == "time"
    assert layout_of(replace(PROFILES["core"], timeline_order="best-last")).order == "best-last"
    backend.responses = [{"answer": "7 June 2023"}, {"answer": "7 June 2023"}]
    answer_hits(llm, "When did Ann say line 10?", _three_windows(), Layout("timeline", order="best-last"))
    answer_hits(llm, "When did Ann say line 10?", _three_windows(), Layout("timeline"))
    (best_last, _), (by_time, _) = backend.history
    assert best_last[0]["content"] == answer_prompt.BEST_LAST_SYSTEM and by_time[0]["content"] == answer_prompt.TIMELINE_SYSTEM
    user = best_last[1]["content"]
    assert user.index('"line 11"') > user.index('"line 3"')  # the best window last, just before the question
    assert user.index('"line 3"') < user.index('"line 1"')  # the worst first, although it is not the oldest
    assert by_time[1]["content"].index('"line 11"') > by_time[1]["content"].index('"line 3"')  # newest last there too
    assert by_time[1]["content"].index('"line 3"') > by_time[1]["content"].index('"line 1"')


def test_a_found_turn_brings_its_own_count_of_turns_before_and_after(db, llm, backend, embedder):
    from nemori_cli.pipeline.runner import Pipeline
    from nemori_cli.retrieval.search import search
    from nemori_cli.store import message_index
    from nemori_cli.store import messages as message_sql
    from tests.conftest import make_messages
    from tests.support.scripted import scripted

    scripted(backend, facts=[[]])
    pipe = Pipeline(db, "u", llm, embedder)
    pipe.add_messages(make_messages(9))
    pipe.process(flush=True)
    middle = db.one("SELECT id FROM messages WHERE user_id = 'u' ORDER BY ts_epoch LIMIT 1 OFFSET 4")["id"]
    found = message_sql.by_ids(db, "u", [middle])[middle]
    ids = lambda window: [m.id for m in window]  # noqa: E731
    assert len(message_index.around(db, "u", [found], 2)[middle]) == 5
    window = message_index.around(db, "u", [found], 2, before=1)[middle]
    assert len(window) == 4 and ids(window).index(middle) == 1  # one before, two after
    alone = message_index.around(db, "u", [found], 0, before=0)[middle]
    assert ids(alone) == [middle]
    hits, _ = search(db, "u", embedder, found.content, replace(PROFILES["budget"], turns_before=1))
    first = next(h for h in hits if h.kind == "message")
    assert ids(first.messages).index(first.id) <= 1


@pytest.mark.parametrize(
    "suffix, changed",
    [
        ("anchor4", {"anchor_words": 4}),
        ("bestlast", {"timeline_order": "best-last"}),
        ("sess1", {"session_windows": 1}),
        ("b1a2", {"turns_before": 1}),
    ],
)
def test_the_bench_offers_each_change_as_a_built_and_an_unbuilt_row(suffix, changed):
    rows = catalog.resolve(f"nemori-{suffix},nemori-unbuilt-{suffix}")
    assert [s.name for s in rows] == [f"nemori-{suffix}", f"nemori-unbuilt-{suffix}"]
    assert all(s.options == replace(PROFILES["core"], **changed) for s in rows)  # one option changed, the rest shipped
    assert PROFILES["core"].turns_before == -1 and PROFILES["core"].timeline_order == "time"  # shipped: both off


@pytest.mark.parametrize("field, value", [("session_windows", -1), ("session_windows", 1.5), ("turns_before", -2)])
def test_a_window_count_out_of_range_is_refused_not_read_as_no_turns(field, value):
    from nemori_cli.services.answer import search_options

    with pytest.raises(ConfigError, match=f"{field}={value!r}"):
        search_options("core", None, {field: value})
    assert search_options("core", None, {"session_windows": 0, "turns_before": -1}) == PROFILES["core"]


def test_the_short_road_reads_the_builds_episodes_only_when_its_budget_asks_for_them(db, llm, backend, embedder):
    """Fifteenth round's row: episodes (with their dates) in the short road's ranking, inside the same token budget."""
    from nemori_cli.pipeline.runner import Pipeline
    from nemori_cli.retrieval import core_answer
    from tests.conftest import make_messages
    from tests.support.scripted import scripted

    scripted(backend, facts=[[]])  # every episode is "Ann sails": "On 8 May 2023 Ann talked about sailing with Bob."
    pipe = Pipeline(db, "u", llm, embedder)
    pipe.add_messages(make_messages(30, topic="sailing"))
    pipe.process(flush=True)
    backend.default = lambda messages, schema: {"answer": "8 May 2023"}
    shown = {}
    for episodes in (0, 3):
        sizes = core_answer.CoreBudget(60, beyond="short", short=450, short_episodes=episodes)  # 60: the turns do not fit
        answer = core_answer.ask(db, "u", embedder, llm, "When did Ann talk about sailing with Bob?", PROFILES["core"], sizes=sizes)
        prompt = backend.prompts_for("Answer")[-1][1]["content"]
        shown[episodes] = ({h.kind for h in answer.hits}, "(episode) Ann sails: On 8 May 2023" in prompt)
        assert timeline.estimate_tokens(prompt) < 450 + 200  # the budget holds with episodes in it (plus instructions)
    assert shown == {0: ({"message"}, False), 3: ({"message", "episode"}, True)}
    row = catalog.resolve("nemori-s450-ep3")[0]
    assert row.options == PROFILES["core"] and row.shape == {"short_episodes": 3}  # the shipped row with one change


def _in_episode(m: Message, episode: int | None) -> Message:
    return replace(m, episode_id=episode)


def test_heads_name_each_turns_episode_under_its_day_and_change_nothing_without_them():
    """Sixteenth round's option: a day's heading names the episode of the turns below it; two episodes, two headings."""
    day = [_in_episode(_msg(1, MAY), 7), _in_episode(_msg(2, MAY + timedelta(minutes=1)), 7)]
    later = [_in_episode(_msg(3, MAY + timedelta(minutes=2)), 8), _msg(4, MAY + timedelta(minutes=3))]  # 4: not built yet
    hits = [_window(1, 0.05, day), _window(3, 0.04, later)]
    plain = timeline.render(hits)
    assert timeline.render(hits, heads={}) == plain == timeline.render(hits, heads=None)
    assert plain.splitlines()[0] == "8 May 2023:" and plain.count("8 May 2023") == 1
    lines = timeline.render(hits, heads={7: "Ann's regatta", 8: "A new boat"}).splitlines()
    assert lines == [
        "8 May 2023 (episode: Ann's regatta):",
        '- Ann: "line 1"',
        '- Ann: "line 2"',
        "8 May 2023 (episode: A new boat):",
        '- Ann: "line 3"',
        "8 May 2023:",  # a turn with no episode is not put under the one before it
        '- Ann: "line 4"',
    ]
    long = timeline.render(hits[:1], heads={7: "x" * 500}).splitlines()[0]
    assert len(long) < len("8 May 2023 (episode: ):") + timeline.HEAD_LIMIT + 4  # a title is clipped, not read whole


def test_the_short_road_heads_its_turns_with_their_episodes_only_when_asked(db, llm, backend, embedder):
    """The option end to end: a built memory's episode title reaches the prompt over the raw turns, and only then."""
    from nemori_cli.pipeline.runner import Pipeline
    from nemori_cli.retrieval import core_answer
    from tests.conftest import make_messages
    from tests.support.scripted import scripted

    scripted(backend, facts=[[]])  # every episode is "Ann sails"
    pipe = Pipeline(db, "u", llm, embedder)
    pipe.add_messages(make_messages(30, topic="sailing"))
    pipe.process(flush=True)
    backend.default = lambda messages, schema: {"answer": "8 May 2023"}
    sizes = core_answer.CoreBudget(60, beyond="short", short=450)  # 60: the turns do not fit, the short road answers
    assert not PROFILES["core"].episode_heads  # off unless asked for: `ask` ships without it
    shown, prompts = {}, {}
    for heads in (False, True):
        options = replace(PROFILES["core"], episode_heads=heads)
        answer = core_answer.ask(db, "u", embedder, llm, "When did Ann talk about sailing with Bob?", options, sizes=sizes)
        prompts[heads] = backend.prompts_for("Answer")[-1][1]["content"]
        shown[heads] = ([(h.kind, h.id) for h in answer.hits], "(episode: Ann sails):" in prompts[heads])
    assert shown[False][0] == shown[True][0] and {k for k, _ in shown[True][0]} == {"message"}  # the same turns
    assert (shown[False][1], shown[True][1]) == (False, True)
    assert prompts[True].replace(" (episode: Ann sails):", ":") == prompts[False]  # the heading is all that changes
    as_of = replace(PROFILES["core"], episode_heads=True, as_of=MAY + timedelta(days=3650))
    then = core_answer.ask(db, "u", embedder, llm, "When did Ann talk about sailing with Bob?", as_of, sizes=sizes)
    assert then.hits and "(episode:" not in backend.prompts_for("Answer")[-1][1]["content"]  # as of a moment: the bare dates
    row = catalog.resolve("nemori-s450-heads")[0]
    assert row.options == replace(PROFILES["core"], episode_heads=True)  # the shipped row with one change


@pytest.mark.parametrize("field", ["episode_heads", "facts_beyond"])
def test_a_switch_given_as_text_is_refused_not_read_as_on(field):
    from nemori_cli.services.answer import search_options

    with pytest.raises(ConfigError, match=f"{field}='false'"):
        search_options("core", None, {field: "false"})
    assert search_options("core", None, {field: True}) == replace(PROFILES["core"], **{field: True})
