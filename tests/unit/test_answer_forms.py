"""The tenth round's ways of asking the short road's reader (SearchOptions.answer_form), off by default.

"quote": the reader writes the words that answer before the answer, in that order, and only the answer is kept.
"question-first": the question is read before the memories as well as after them. Each form opens with its own
instructions head and keeps that head's saved state in a file of its own, so no form reads another's.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest

from nemori_cli.bench import catalog
from nemori_cli.errors import ConfigError
from nemori_cli.prompts import answer as answer_prompt
from nemori_cli.prompts import timeline
from nemori_cli.retrieval.answer import Layout, answer_hits, layout_of
from nemori_cli.retrieval.search import PROFILES
from tests.support.windows import window
from tests.unit.fake_ingest import conversation, isolate, use_fake_answers, use_fakes

MAY = datetime(2023, 5, 8, 13)
QUESTION = "Where did Ann go kayaking?"


def _hits():
    return window("Ann", ["Morning!", "We kayaked on Lake Tahoe on Sunday.", "It was cold."], MAY)


def test_the_quote_is_written_before_the_answer_and_clipped():
    quoted = answer_prompt.timeline_schema(False, "quote")
    assert list(quoted.model_json_schema()["properties"]) == ["quote", "answer"]  # the order the model writes them in
    assert list(answer_prompt.timeline_schema(False).model_json_schema()["properties"]) == ["answer"]  # shipped
    held = quoted(quote="x" * 1000, answer="Lake Tahoe")
    assert len(held.quote) <= answer_prompt.QUOTE_MAX and held.answer == "Lake Tahoe"
    with pytest.raises(ValueError, match="time of day"):
        answer_prompt.timeline_schema(True, "quote")(quote="at 13:56", answer="13:56")  # the duration check holds too


def test_each_form_has_its_own_instructions_and_saved_state_file():
    shipped = answer_prompt.TIMELINE_SYSTEM
    quote = answer_prompt.QUOTE_SYSTEM
    assert "First copy the words of the memories that answer" in quote and "copy nothing and answer" in quote
    assert "First copy" not in shipped and "never by copying a whole line" in shipped
    assert answer_prompt.timeline_head() == [{"role": "system", "content": shipped}, {"role": "user", "content": "Memories:\n"}]
    assert answer_prompt.timeline_head(form="quote")[0]["content"] == quote
    assert answer_prompt.timeline_head(form="question-first") == [
        {"role": "system", "content": shipped},
        {"role": "user", "content": "Question:"},
    ]
    slots = {answer_prompt.head_slot(order, form) for order in timeline.ORDERS for form in timeline.ANSWER_FORMS}
    assert len(slots) == len(timeline.ORDERS) * len(timeline.ANSWER_FORMS)  # no two share a file
    assert answer_prompt.head_slot() == "head" and answer_prompt.head_slot("best-last") == "best-last-head"  # as before


@pytest.mark.parametrize("form", timeline.ANSWER_FORMS)
def test_every_forms_prompt_opens_with_its_head_and_ends_with_the_question(form, llm, backend):
    reply = {"quote": "We kayaked on Lake Tahoe", "answer": "Lake Tahoe"} if form == "quote" else {"answer": "Lake Tahoe"}
    backend.responses = [reply]
    answer = answer_hits(llm, QUESTION, _hits(), Layout("timeline", form=form))
    assert answer.answer == "Lake Tahoe" and not answer.failed  # the quote is never the answer
    ((prompt, _schema),) = backend.history
    system, user = answer_prompt.timeline_head(form=form)
    assert prompt[0] == system and prompt[1]["content"].startswith(user["content"])  # the saved head is its prefix
    assert prompt[1]["content"].endswith(f"Question: {QUESTION}")
    assert prompt[1]["content"].count(QUESTION) == (2 if form == "question-first" else 1)
    if form == "question-first":
        assert prompt[1]["content"].startswith(f"Question: {QUESTION}\nMemories:\n")


def test_a_form_is_refused_where_it_was_never_measured_rather_than_half_applied():
    with pytest.raises(ValueError, match="timeline order 'time', not 'best-last'"):
        answer_prompt.timeline_head("best-last", "quote")  # best-last's instructions would drop the quote's
    with pytest.raises(ValueError, match="answer form 'cite'"):
        answer_prompt.render_timeline(QUESTION, _hits(), now=None, arithmetic=[], form="cite")
    assert answer_prompt.timeline_head("best-last")[0]["content"] == answer_prompt.BEST_LAST_SYSTEM  # as before


def test_a_form_left_out_is_the_shipped_one_and_the_options_carry_it():
    assert PROFILES["core"].answer_form == "answer" and layout_of(PROFILES["core"]).form == "answer"
    assert layout_of(replace(PROFILES["core"], answer_form="quote")).form == "quote"


@pytest.mark.parametrize(
    "overrides, refused",
    [
        ({"answer_form": "cite"}, "answer_form='cite' is not one of answer, quote, question-first"),
        ({"answer_form": "quote", "timeline_order": "best-last"}, "timeline_order='time' only"),
    ],
)
def test_an_unknown_form_or_an_unmeasured_pairing_is_refused(overrides, refused):
    from nemori_cli.services.answer import search_options

    with pytest.raises(ConfigError, match=refused):
        search_options("core", None, overrides)
    assert search_options("core", None, {"answer_form": "question-first"}).answer_form == "question-first"


@pytest.mark.parametrize("suffix, form", [("quote", "quote"), ("qfirst", "question-first")])
def test_the_bench_offers_each_form_as_a_built_and_an_unbuilt_row(suffix, form):
    rows = catalog.resolve(f"nemori-{suffix},nemori-unbuilt-{suffix}")
    assert [s.name for s in rows] == [f"nemori-{suffix}", f"nemori-unbuilt-{suffix}"]
    assert all(s.options == replace(PROFILES["core"], answer_form=form) for s in rows)


@pytest.mark.parametrize("form", ["quote", "question-first"])
def test_the_short_road_holds_the_forms_own_head_and_its_prompt_begins_with_it(form, monkeypatch, tmp_path):
    """Beyond the window, `ask` with a form loads that form's instructions head (not the shipped one) and answers."""
    from nemori_cli import Memory
    from nemori_cli.retrieval import core_answer
    from nemori_cli.retrieval.core_cache import CoreCache, Head

    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    asked = use_fake_answers(monkeypatch)
    held: list = []
    real = CoreCache.prepare
    monkeypatch.setattr(CoreCache, "prepare", lambda self, llm, user, prefix: held.append(prefix) or real(self, llm, user, prefix))
    small = core_answer.CoreBudget(40, beyond="short")  # 40 tokens: the messages do not fit, so the short road answers
    monkeypatch.setattr(core_answer, "budget_for", lambda window, *tail, beyond=None: small)
    with Memory(tmp_path / "m.db") as memory:
        memory.ingest(conversation(per_topic=2))
        answer = memory.ask("What did Ann and Bob say about the kayak?", answer_form=form)
    assert answer.answer == "the kayak"
    heads = [p for p in held if isinstance(p, Head)]
    assert heads and all(h.prefix == answer_prompt.timeline_head(form=form) and h.slot == answer_prompt.head_slot(form=form) for h in heads)
    prompt = asked[-1].history[-1][0]
    assert prompt[0] == heads[-1].prefix[0] and prompt[1]["content"].startswith(heads[-1].prefix[1]["content"])
