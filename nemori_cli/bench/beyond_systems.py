"""Rows that measure a change to `ask`'s road beyond the window before it ships (issue 41's rounds, docs/BEYOND.md).

Each is `nemori` or `nemori-unbuilt` with one search option changed, so a
tuning run and a confirmation run compare it with the shipped row on the same
databases. A row stays after its round so the measurement can be repeated.
"""

from __future__ import annotations

from dataclasses import replace

from nemori_cli.bench.nemori_systems import CoreNemoriSystem, UnbuiltNemoriSystem
from nemori_cli.bench.systems import Listing
from nemori_cli.retrieval.search import PROFILES

OFFERED = Listing()  # bench/catalog.py registers these by name

# Seventh round: a turn found by meaning alone anchors a window only if it says something (retrieval/anchors.py).
ANCHOR_WORDS = 4
OFFERED.register(
    CoreNemoriSystem(
        "nemori-anchor4",
        f"nemori where a turn found by meaning alone anchors a window of the short road only with {ANCHOR_WORDS} words of "
        "substance or a word of the question's (no farewells found by the speaker's name)",
        options=replace(PROFILES["core"], anchor_words=ANCHOR_WORDS),
    )
)
OFFERED.register(
    UnbuiltNemoriSystem(
        "nemori-unbuilt-anchor4",
        f"nemori-unbuilt where a turn found by meaning alone anchors a window only with {ANCHOR_WORDS} words of substance "
        "or a word of the question's",
        options=replace(PROFILES["core"], anchor_words=ANCHOR_WORDS),
    )
)

# Eighth round: the short road's timeline in blocks, the best-ranked read last (prompts/timeline.render).
OFFERED.register(
    CoreNemoriSystem(
        "nemori-bestlast",
        "nemori whose short road shows each retrieved window as a block under its date, the best-ranked last, next to "
        "the question (the shipped timeline is one, oldest first)",
        options=replace(PROFILES["core"], timeline_order="best-last"),
    )
)
OFFERED.register(
    UnbuiltNemoriSystem(
        "nemori-unbuilt-bestlast",
        "nemori-unbuilt whose short road shows each retrieved window as a block under its date, the best-ranked last",
        options=replace(PROFILES["core"], timeline_order="best-last"),
    )
)

# Eighth round: at most one window of raw turns from each chat session in the short road's budget (budget.select).
OFFERED.register(
    CoreNemoriSystem(
        "nemori-sess1",
        "nemori whose short road keeps at most one window of turns from each chat session, so an answer spread over "
        "sessions is not crowded out by the best session's neighbours",
        options=replace(PROFILES["core"], session_windows=1),
    )
)
OFFERED.register(
    UnbuiltNemoriSystem(
        "nemori-unbuilt-sess1",
        "nemori-unbuilt whose short road keeps at most one window of turns from each chat session",
        options=replace(PROFILES["core"], session_windows=1),
    )
)

# Eighth round: a found turn brings one turn before it and two after (the reply to a question comes after it).
OFFERED.register(
    CoreNemoriSystem(
        "nemori-b1a2",
        "nemori whose short road shows one turn before each found turn and two after it (shipped: two either side)",
        options=replace(PROFILES["core"], turns_before=1),
    )
)
OFFERED.register(
    UnbuiltNemoriSystem(
        "nemori-unbuilt-b1a2",
        "nemori-unbuilt whose short road shows one turn before each found turn and two after it",
        options=replace(PROFILES["core"], turns_before=1),
    )
)
