"""Rows that measure a change to `ask`'s road beyond the window before it ships (issue 41's rounds, docs/BEYOND.md).

Each change is a pair of rows, `nemori-X` and `nemori-unbuilt-X`: the shipped rows with one search option changed,
so a tuning run and a confirmation run compare it with the shipped row on the same databases. A row stays after its
round so the measurement can be repeated (on another reader, another build, new questions).
"""

from __future__ import annotations

from dataclasses import replace

from nemori_cli.bench.nemori_systems import CoreNemoriSystem, UnbuiltNemoriSystem
from nemori_cli.bench.systems import Listing
from nemori_cli.memory.profile import DEFAULT, Profile
from nemori_cli.retrieval.search import PROFILES

OFFERED = Listing()  # bench/catalog.py registers these by name


def _pair(suffix: str, what: str, profile: Profile = DEFAULT, **changed) -> None:
    """`nemori-<suffix>` (built) and `nemori-unbuilt-<suffix>`, each its shipped row with ``changed`` search options
    (and, where given, another build ``profile``: its databases are then built apart, bench/nemori_systems' build_key)."""
    options = replace(PROFILES["core"], **changed)
    OFFERED.register(CoreNemoriSystem(f"nemori-{suffix}", f"nemori {what}", profile, options=options))
    OFFERED.register(UnbuiltNemoriSystem(f"nemori-unbuilt-{suffix}", f"nemori-unbuilt {what}", profile, options=options))


# Seventh round, rejected: a turn found by meaning alone anchors a window only if it says something (retrieval/anchors.py).
ANCHOR_WORDS = 4
_pair(
    "anchor4",
    f"where a turn found by meaning alone anchors a window of the short road only with {ANCHOR_WORDS} words of "
    "substance or a word of the question's (no farewells found by the speaker's name)",
    anchor_words=ANCHOR_WORDS,
)
# Eighth round, rejected: the short road's timeline in blocks, the best-ranked read last (prompts/timeline.render).
_pair(
    "bestlast",
    "whose short road shows each retrieved window as a block under its date, the best-ranked last, next to the "
    "question (shipped: one timeline, oldest first)",
    timeline_order="best-last",
)
# Eighth round, screened and not benched: at most one window of turns from each chat session (budget.select).
_pair(
    "sess1",
    "whose short road keeps at most one window of turns from each chat session, so an answer spread over sessions "
    "is not crowded out by the best session's neighbours",
    session_windows=1,
)
# Eighth round, not shipped (level on both splits): a found turn brings one turn before it and two after.
_pair(
    "b1a2",
    "whose short road shows one turn before each found turn and two after it (shipped: two either side)",
    turns_before=1,
)
# Ninth round: the days a question names ("on 3 June, 2023", "in December") vote for the turns said around them.
_pair(
    "dated",
    "whose short road also ranks the turns said around the days the question names, by meaning, as a fourth list "
    "in its fusion (retrieval/question_dates.py)",
    date_vote=1.0,
)
# Tenth round: the reader, not the context (the 0.5B reader answered from another line with all the evidence shown).
_pair(
    "quote",
    "whose short road asks the reader to copy the words that answer first, then to answer (prompts/answer.QUOTE_SYSTEM)",
    answer_form="quote",
)
_pair(
    "qfirst",
    "whose short road puts the question before the memories as well as after them",
    answer_form="question-first",
)
# Thirteenth round: a turn's vector also reads the turn before and the turn after it (store/message_index.vectors_for).
NEIGHBOURS = replace(DEFAULT, turn_vectors="neighbours")
_pair(
    "nbr",
    "whose raw turns are each embedded as the turn alone plus the turn read with one turn before and one after, "
    "the two vectors summed (shipped: the turn alone)",
    NEIGHBOURS,
)
_pair(
    "nbr-b1a2",
    "with nbr's turn vectors, and one turn before each found turn and two after it on the short road",
    NEIGHBOURS,
    turns_before=1,
)
# Fifteenth round: the build's episodes (narratives under their absolute dates) in the short road's one ranking, cut at
# the same ~450 tokens as the raw turns (CoreBudget.short_episodes): what a built memory adds on when-questions.
OFFERED.register(
    CoreNemoriSystem(
        "nemori-s450-ep3",
        "nemori with the build's 3 best episodes (narratives under their dates) in the short road's ranking beside the raw "
        "turns, the same ~450 tokens (shipped: raw turns alone)",
        options=PROFILES["core"],
        short_episodes=3,
    )
)
# Sixteenth round: the build's episodes as headings, not as text. Each day's heading over the short road's raw turns also
# names the episode they belong to (SearchOptions.episode_heads); no narrative, no turn taken out. Built only: before
# the build there is no title, and the row would be the shipped one.
OFFERED.register(
    CoreNemoriSystem(
        "nemori-s450-heads",
        "nemori whose short road heads each day's raw turns with the title of the episode they belong to, the build's "
        "title over the exact lines (shipped: the date alone)",
        options=replace(PROFILES["core"], episode_heads=True),
    )
)
