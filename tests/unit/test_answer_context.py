"""The budgeted answer context: raw messages indexed and retrieved, one ranking cut by tokens, a dated
timeline, date arithmetic by code, abstention, and one answer path (fake LLM and embedder)."""

from __future__ import annotations

from datetime import date, datetime

import pytest

from nemori_cli.domain import Hit, IncomingMessage, Message
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.prompts import answer as answer_prompt
from nemori_cli.prompts import timeline
from nemori_cli.retrieval import budget, timecalc
from nemori_cli.retrieval.answer import Layout, abstains, answer_hits, ask
from nemori_cli.retrieval.search import PROFILES, search
from nemori_cli.store import forget, message_index
from tests.support.scripted import scripted


def _chat() -> list[IncomingMessage]:
    t = datetime(2023, 5, 8, 13, 0)
    lines = [
        ("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
        ("Melanie", "That sounds amazing! What happened there?"),
        ("Caroline", "People shared their transgender stories; I felt accepted."),
        ("Melanie", "I ran a charity race for mental health last Saturday."),
        ("Caroline", "My violin teacher charges 45 dollars an hour."),
        ("Melanie", "Painting calms me down after a long week."),
    ]
    return [
        IncomingMessage(speaker=s, content=c, timestamp=t.replace(minute=i), source_id=f"d1:{i}", session="s1")
        for i, (s, c) in enumerate(lines)
    ]


def _ingest(db, llm, backend, embedder, messages=None):
    scripted(backend, facts=[[]])
    pipe = Pipeline(db, "u", llm, embedder)
    pipe.add_messages(messages or _chat())
    pipe.process(flush=True)


def test_every_stored_message_is_indexed_once_pending_ones_included(db, llm, backend, embedder):
    scripted(backend, facts=[[]])
    pipe = Pipeline(db, "u", llm, embedder)
    pipe.add_messages(_chat())
    assert message_index.count(db, "u") == 6 and not message_index.unindexed(db, "u")  # before any episode exists
    pipe.add_messages(_chat())  # re-ingesting adds nothing, indexes nothing twice
    assert message_index.count(db, "u") == 6
    assert db.one("SELECT count(*) AS n FROM message_vec WHERE user_id = 'u'")["n"] == 6


def test_a_database_made_before_the_message_index_is_indexed_on_its_next_ingest(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder)
    with db.transaction():  # as a file from before migration 6 would be: messages, no index rows
        db.conn.execute("DELETE FROM message_fts")
        db.conn.execute("DELETE FROM message_vec")
        if "message_vec_bits" in db.table_names():  # SQLite's quantised copy: a file that old had no vectors in it either
            db.conn.execute("DELETE FROM message_vec_bits")
    assert len(message_index.unindexed(db, "u")) == 6
    Pipeline(db, "u", llm, embedder).add_messages([])
    assert message_index.count(db, "u") == 6


def test_a_raw_turn_reaches_the_answer_with_its_neighbours_even_when_no_narrative_kept_it(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder)
    hits, _ = search(db, "u", embedder, "How much does the violin teacher charge?", PROFILES["budget"])
    messages = [h for h in hits if h.kind == "message"]
    assert messages and "45 dollars" in messages[0].text
    around = [m.content for m in messages[0].messages]
    assert around[0].startswith("People shared") and around[-1].startswith("Painting")  # two turns before, the one after
    assert len(around) == 4


def test_forgetting_an_episode_or_a_user_removes_its_messages_from_the_message_index(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder)
    episode = db.one("SELECT id FROM episodes WHERE user_id = 'u'")["id"]
    with db.transaction():
        forget.forget_episode(db, "u", episode)
    assert message_index.count(db, "u") == 0
    assert db.one("SELECT count(*) AS n FROM message_vec")["n"] == 0
    _ingest(db, llm, backend, embedder)
    with db.transaction():
        counts = forget.forget_user(db, "u")
    assert counts["message_fts"] == 6 and counts["message_vec"] == 6 and message_index.count(db, "u") == 0


def _hit(kind, i, score, text, when, messages=()):
    return Hit(kind=kind, id=i, score=score, title=f"t{i}", text=text, start=when, end=when, messages=tuple(messages))


def _msg(i, text, when, speaker="Ann", session="s1"):
    return Message(id=i, user="u", key=str(i), speaker=speaker, content=text, timestamp=when, source_id=str(i), session=session)


def test_the_budget_keeps_the_best_hits_that_fit_and_counts_a_shared_turn_once():
    day = datetime(2023, 5, 8, 12)
    m1, m2, m3 = _msg(1, "a" * 80, day), _msg(2, "b" * 80, day), _msg(3, "c" * 80, day)
    hits = [
        _hit("episode", 1, 0.030, "n" * 2000, day),  # too long for the budget
        _hit("message", 2, 0.032, m2.content, day, [m1, m2, m3]),
        _hit("message", 3, 0.031, m3.content, day, [m2, m3]),  # adds nothing new: skipped
        _hit("fact", 4, 0.020, "Ann owns a boat.", day),
    ]
    kept = budget.select(hits, 120)
    assert [h.id for h in kept] == [2, 4]
    cost = sum(timeline.estimate_tokens(line.text) + 1 for h in kept for line in timeline.lines_of(h))
    assert cost <= 120


def test_the_timeline_is_dated_once_per_day_oldest_first_and_quotes_raw_turns_with_resolved_times():
    d1, d2 = datetime(2023, 5, 8, 13), datetime(2023, 5, 25, 9)
    msg = _msg(7, "I went to a support group yesterday.", d1, speaker="Caroline")
    hits = [
        _hit("fact", 1, 0.03, "Melanie ran a charity race.", d2),
        _hit("message", 7, 0.02, msg.content, d1, [msg]),
        _hit("episode", 3, 0.01, "Caroline told Melanie about the group.", d1),
    ]
    text = timeline.render(hits)
    lines = text.splitlines()
    assert lines[0] == "8 May 2023:" and "25 May 2023:" in lines and lines.index("25 May 2023:") > 2
    assert '- Caroline: "I went to a support group yesterday [7 May 2023]."' in lines
    assert lines[1].startswith("- (episode)")  # within a day: narrative, then facts, then turns
    assert "13:00" not in text  # dates only: a clock time invites clock-time answers


@pytest.mark.parametrize(
    "question, duration, order",
    [
        ("How long has Caroline had her friends?", True, False),
        ("How many days passed between the race and the party?", True, False),
        ("How long ago was her birthday?", True, False),
        ("Which came first, the race or the party?", False, True),
        ("What did Caroline research?", False, False),
        ("What did Melanie realize after the charity race?", False, False),
        ("Did I go to the concert first or the museum?", False, True),
    ],
)
def test_questions_that_need_date_arithmetic_are_recognised(question, duration, order):
    assert timecalc.asks_duration(question) is duration and timecalc.asks_order(question) is order


def test_spans_between_days_and_to_today_are_computed_not_left_to_the_model():
    days = [date(2023, 5, 7), date(2023, 5, 25)]
    between = timecalc.notes("How many days passed between the group and the race?", days, date(2023, 6, 30))
    assert between == ["From 7 May 2023 to 25 May 2023: 18 days (about 3 weeks)."]
    ago = timecalc.notes("How many weeks ago did I go to the group?", days, date(2023, 6, 30))
    assert "From 7 May 2023 to today (30 June 2023): 54 days (about 8 weeks)." in ago and len(ago) == 2
    assert timecalc.notes("How many weeks ago did I go to the group?", days, None) == []  # no today, nothing to count to
    # A span the chat states itself ("for 4 years") gets no arithmetic on the conversation's own dates.
    assert timecalc.notes("How long has Caroline had her current group of friends for?", days, None) == []
    assert timecalc.notes("What did she paint?", days, None) == []
    assert timecalc.notes("Which came first, the group or the race?", days, None) == ["In order: 7 May 2023, then 25 May 2023."]
    assert timecalc.parse_day("30 May 2023 23:40") == date(2023, 5, 30)
    assert timecalc.parse_day("2023/05/30 (Tue) 23:40") == date(2023, 5, 30)
    assert timecalc.parse_day("not a date at all") is None and timecalc.parse_day(None) is None


def test_a_clock_time_given_to_a_how_long_question_is_refused_and_asked_again(llm, backend):
    backend.responses = [{"answer": "13:56"}, {"answer": "4 years"}]
    day = datetime(2023, 5, 8, 13, 56)
    hits = [_hit("fact", 1, 0.03, "Caroline has known her friends for 4 years.", day)]
    answer = answer_hits(llm, "How long has Caroline had her friends?", [replace_similarity(hits[0], 0.8)])
    assert answer.answer == "4 years" and len(backend.history) == 2
    assert answer_prompt.is_clock_time("1.56 pm") and not answer_prompt.is_clock_time("4 years")


def replace_similarity(hit: Hit, similarity: float) -> Hit:
    from dataclasses import replace

    return replace(hit, similarity=similarity)


def test_nothing_retrieved_means_not_mentioned_without_a_model_call(db, llm, backend, embedder):
    answer, cited = ask(db, "nobody", embedder, llm, "When did Priya go climbing?")
    assert answer.abstained and answer.answer == answer_prompt.NOT_MENTIONED and cited == []
    assert backend.history == []  # no call: nothing to cite, nothing to invent
    unrelated = [replace_similarity(_hit("fact", 1, 0.01, "Bob likes tea.", datetime(2023, 5, 8)), 0.05)]
    assert answer_hits(llm, "What is the capital of Peru?", unrelated).abstained and backend.history == []


def test_a_model_that_says_it_does_not_know_is_marked_abstained(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder)
    backend.default = lambda messages, schema: {"answer": "Not mentioned in my memories."}
    answer, _ = ask(db, "u", embedder, llm, "What is Caroline's violin teacher called?")
    assert answer.abstained and not answer.failed
    assert abstains("I don't know") and abstains("That is not mentioned.") and not abstains("45 dollars an hour")


def test_citations_are_the_episodes_whose_memories_hold_the_answer(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder)
    backend.default = lambda messages, schema: {"answer": "45 dollars an hour"}
    answer, cited = ask(db, "u", embedder, llm, "How much does the violin teacher charge?")
    episode = db.one("SELECT id FROM episodes WHERE user_id = 'u'")["id"]
    assert cited == [episode] and answer.cited == (episode,)
    prompt = backend.history[-1][0][-1]["content"]
    assert '"My violin teacher charges 45 dollars an hour."' in prompt  # the raw turn, quoted exactly
    assert backend.history[-1][1]["properties"].keys() == {"answer"}  # no citation tokens to write


def test_the_paper_profile_keeps_k_m_r_and_the_grouped_layout(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder)
    backend.default = lambda messages, schema: {"answer": "a violin", "sources": []}
    answer, _ = ask(db, "u", embedder, llm, "What does Caroline play?", PROFILES["paper"])
    assert {h.kind for h in answer.hits} <= {"episode", "fact", "summary"}
    assert "Messages:" in backend.history[-1][0][-1]["content"]  # r = 2: the top episode brings its raw messages
    assert answer_hits(llm, "q", list(answer.hits), Layout("grouped", 2), gate=False).answer == "a violin"


def test_a_when_question_is_told_the_date_of_its_best_turn_and_what_its_relative_words_mean():
    said = datetime(2023, 5, 8, 13, 56)
    turn = _msg(5, "Yeah, I painted that lake sunrise last year! It's special to me.", said, speaker="Melanie")
    before = _msg(4, "Is this your own painting?", said, speaker="Caroline")
    hits = [_hit("fact", 1, 0.04, "Melanie paints.", said), _hit("message", 5, 0.03, turn.content, said, [before, turn])]
    assert timecalc.when_hint("When did Melanie paint a sunrise?", hits) == [
        'The line that best matches the question (Melanie) was said on 8 May 2023; "last year" there means 2022.'
    ]
    assert timecalc.when_hint("What did Melanie paint?", hits) == []
    plain = [_hit("message", 4, 0.03, before.content, said, [before])]
    assert timecalc.when_hint("When did Caroline ask?", plain) == [
        "The line that best matches the question (Caroline) was said on 8 May 2023."
    ]


@pytest.mark.parametrize(
    "said, kept",
    [
        ("Priya went climbing yesterday [3 March 2024] with Maya.", "Priya went climbing 3 March 2024 with Maya."),
        ("It was really rewarding. Really made me think about our minds.", "It was really rewarding"),
        ("I met Dr. Smith there. He was kind.", "I met Dr. Smith there"),
        ("Yes. She did", "Yes. She did"),  # one word is no sentence to stop at
        ("2.5 km", "2.5 km"),
        ("on [7 May 2023]", "on 7 May 2023"),
        ("… can expand her store …", "can expand her store"),  # a cut line's marks are no part of an answer
        ("…", "…"),
        ("2023-10", "October 2023"),  # an ISO date is said as the prompt says dates (LoCoMo's gold: "October, 2023")
        ("On 2023-06-16 with Maya", "On 16 June 2023 with Maya"),
    ],
)
def test_an_answer_keeps_its_first_sentence_and_the_date_a_copied_relative_time_meant(said, kept):
    assert answer_prompt.tidy(said) == kept


def test_a_long_answer_is_clipped_not_refused(llm, backend):
    backend.responses = [{"answer": "word " * 80}]
    day = datetime(2023, 5, 8)
    answer = answer_hits(llm, "What did Ann say?", [replace_similarity(_hit("fact", 1, 0.03, "Ann said many words.", day), 0.9)])
    assert not answer.failed and len(answer.answer) <= answer_prompt.TIMELINE_ANSWER_MAX and len(backend.history) == 1


def test_a_span_between_two_events_is_computed_from_the_turns_that_name_them():
    mass_said, ash_said = datetime(2023, 3, 6, 9), datetime(2023, 4, 5, 20)
    mass = _msg(1, "I went to the Sunday mass at St. Mary's Church yesterday, lovely choir.", mass_said, speaker="user")
    ash = _msg(2, "Today I attended the Ash Wednesday service at the cathedral.", ash_said, speaker="user")
    other = _msg(3, "Can you recommend a good book?", ash_said, speaker="user")
    hits = [
        _hit("message", 3, 0.05, other.content, ash_said, [other]),
        _hit("message", 1, 0.04, mass.content, mass_said, [mass]),
        _hit("message", 2, 0.03, ash.content, ash_said, [ash]),
    ]
    lines = timecalc.between_hint(
        "How many days had passed between the Sunday mass at St. Mary's Church and the Ash Wednesday service?", hits
    )
    assert lines[0] == '"the Sunday mass at St. Mary\'s Church": 5 March 2023 (user said on 6 March 2023 "yesterday").'
    assert lines[1].startswith('"the Ash Wednesday service": 5 April 2023')
    assert lines[2] == "From 5 March 2023 to 5 April 2023: 31 days (about 4 weeks)."
    before = timecalc.between_hint("How many days before the Ash Wednesday service did I go to the Sunday mass?", hits)
    assert before and before[-1].endswith("31 days (about 4 weeks).")
    assert timecalc.between_hint("What did I do on Sunday?", hits) == []


def test_words_of_the_question_that_no_message_contains_are_named_to_the_model(db, llm, backend, embedder):
    from nemori_cli.retrieval.answer import question_words

    _ingest(db, llm, backend, embedder)
    assert question_words("What is the name of my hamster?") == ["hamster"]
    assert message_index.unmentioned(db, "u", ["hamster", "violin", "teachers"]) == ["hamster"]  # stemmed as FTS5 does
    backend.default = lambda messages, schema: {"answer": "Hamster"}
    calls = len(backend.history)
    answer, cited = ask(db, "u", embedder, llm, "What is the name of my hamster?")
    assert answer.abstained and cited == [] and len(backend.history) == calls  # no content word was ever said: no model call
    ask(db, "u", embedder, llm, "What is the name of Caroline's hamster?")
    assert 'No memory mentions "hamster".' in backend.history[-1][0][-1]["content"]  # "Caroline" was said: the model decides
    ask(db, "u", embedder, llm, "How much does the violin teacher charge?")
    assert "No memory mentions" not in backend.history[-1][0][-1]["content"]


def test_an_event_dated_in_words_is_read_from_the_line_that_names_it():
    said = datetime(2023, 2, 20, 12, 15)
    ash = _msg(1, "By the way, I just came from the Ash Wednesday service at the cathedral on February 1st.", said, speaker="user")
    mass = _msg(2, "I recently attended the Sunday mass at St. Mary's Church on January 2nd, a moving sermon.", said, speaker="user")
    echo = _msg(3, "Ash Wednesday is a powerful reminder; the service at a cathedral can be moving.", said, speaker="assistant")
    hits = [_hit("message", i, 0.03, m.content, said, [m]) for i, m in ((3, echo), (1, ash), (2, mass))]
    lines = timecalc.between_hint(
        "How many days had passed between the Sunday mass at St. Mary's Church and the Ash Wednesday service at the cathedral?", hits
    )
    assert lines[0].startswith('"the Sunday mass at St. Mary\'s Church": 2 January 2023') and "February 1st" in lines[1]
    assert lines[2] == "From 2 January 2023 to 1 February 2023: 30 days (about 4 weeks)."
    assert answer_prompt.today_text("2023/04/01 (Sat) 05:39") == "1 April 2023"


def test_each_event_of_a_between_question_is_looked_up_on_its_own(db, llm, backend, embedder):
    t = datetime(2023, 2, 20, 12, 0)
    chat = [
        IncomingMessage(
            speaker="user", content="I attended the Ash Wednesday service at the cathedral on February 1st.", timestamp=t, source_id="a"
        ),
        *[
            IncomingMessage(
                speaker="assistant",
                content=f"Here is tip {i} about soup kitchens and volunteering.",
                timestamp=t.replace(minute=i + 1),
                source_id=f"t{i}",
            )
            for i in range(30)
        ],
        IncomingMessage(
            speaker="user",
            content="I recently went to the Sunday mass at St. Mary's Church on January 2nd.",
            timestamp=t.replace(hour=21),
            source_id="m",
        ),
    ]
    _ingest(db, llm, backend, embedder, chat)
    backend.default = lambda messages, schema: {"answer": "30 days"}
    ask(
        db,
        "u",
        embedder,
        llm,
        "How many days had passed between the Sunday mass at St. Mary's Church and the Ash Wednesday service at the cathedral?",
        replace_options(budget=60),
    )
    prompt = backend.history[-1][0][-1]["content"]
    assert "From 2 January 2023 to 1 February 2023: 30 days (about 4 weeks)." in prompt


def replace_options(**changes):
    from dataclasses import replace

    return replace(PROFILES["budget"], **changes)


def test_a_memory_not_yet_indexed_is_never_told_its_words_were_not_said(db, llm, backend, embedder):
    _ingest(db, llm, backend, embedder)
    with db.transaction():  # a file from before migration 6, asked before its next ingest
        db.conn.execute("DELETE FROM message_fts")
        db.conn.execute("DELETE FROM message_vec")
        if "message_vec_bits" in db.table_names():  # SQLite's quantised copy: a file that old had no vectors in it either
            db.conn.execute("DELETE FROM message_vec_bits")
    backend.default = lambda messages, schema: {"answer": "45 dollars"}
    answer, _ = ask(db, "u", embedder, llm, "How much does the violin teacher charge?")
    assert not answer.abstained and answer.answer == "45 dollars"
    assert "No memory mentions" not in backend.history[-1][0][-1]["content"]


def test_a_session_cap_keeps_the_budget_from_spending_itself_on_one_session():
    day = datetime(2023, 5, 8, 12)
    a = [_msg(i, f"turn {i} " + "x" * 40, day, session="s1") for i in range(1, 4)]
    b = _msg(9, "turn 9 " + "y" * 40, day, session="s2")
    hits = [
        _hit("message", 1, 0.05, a[0].content, day, [a[0]]),
        _hit("message", 2, 0.04, a[1].content, day, [a[1]]),
        _hit("message", 3, 0.03, a[2].content, day, [a[2]]),
        _hit("message", 9, 0.02, b.content, day, [b]),
    ]
    assert [h.id for h in budget.select(hits, 1000)] == [1, 2, 3, 9]
    assert [h.id for h in budget.select(hits, 1000, per_session=2)] == [1, 2, 9]  # the third of s1 gives way
    assert [h.id for h in budget.select(hits, 1000, per_session=1)] == [1, 9]
