"""What an ingest will cost, before it runs: windows, episodes, LLM calls, tokens, minutes.

Calls are counted from the method's structure (one partition call per window,
the per-episode stages) with ratios taken from the reference run
(measured.py); tokens and time scale with the characters to process at the
rates given (rates.py). Everything here is arithmetic on counts: no model, no
database.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nemori_cli import measured
from nemori_cli.memory import modes
from nemori_cli.memory.profile import Profile
from nemori_cli.rates import Rates

# Ratios of the reference run (measured.py: conv-26 sessions 1-5 with `small`), read from its figures rather than
# copied: how many messages made an episode, and how many calls each per-episode stage made per episode.
_EPISODES = measured.EPISODES
MESSAGES_PER_EPISODE = measured.MESSAGES / _EPISODES  # 92 messages made 15 episodes
NARRATION_PER_EPISODE = measured.STAGES["narration"].calls / _EPISODES  # every episode is narrated once
DISTILLATION_PER_EPISODE = measured.STAGES["distillation"].calls / _EPISODES
# Only when known facts are evoked (none are for the first episodes); what is evoked varies with the wording of
# the facts, so another run of the same slice may make more or fewer of these calls.
PREDICTION_PER_EPISODE = measured.STAGES["prediction"].calls / _EPISODES
CONSOLIDATION_PER_EPISODE = measured.STAGES["consolidation"].calls / _EPISODES  # only facts naming an older one's people ask
INTEGRATION_PER_EPISODE = measured.STAGES["integration"].calls / _EPISODES  # only a similar, recent earlier episode asks
SUMMARY_PER_EPISODE = 1.0  # --memory summary folds each episode into the summary once (by construction)
PARTITION_PER_WINDOW = 1.0  # one call per window, by construction (the reference run: 7 calls for 7 windows)

# The last group of a full window waits for the next window, so a window moves
# the buffer on by about (window - one episode) messages: 92 messages in
# windows of 20 made 7 windows, not 5.
CARRIED_PER_WINDOW = MESSAGES_PER_EPISODE

# Summary mode was not measured; its call (the running summary plus one
# narrative in, a summary out) is taken to cost what a distillation call does.
# A-MEM's two stages were measured on the same slice (measured.AMEM_STAGES).
_STAGE_COST = {**measured.STAGES, "summary": measured.STAGES["distillation"], **measured.AMEM_STAGES}

# --memory nemori+amem makes a note of every distilled fact: 17 facts from the
# reference run's 15 episodes.
FACTS_PER_EPISODE = measured.FACTS / measured.EPISODES


@dataclass(frozen=True)
class Estimate:
    messages: int
    characters: int
    windows: int
    episodes: int
    calls: dict[str, int]  # per stage, in the method's order
    prompt_tokens: int
    output_tokens: int
    seconds: float  # LLM time; embedding and storing are comparatively small
    rates: Rates

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


def stages(profile: Profile) -> tuple[str, ...]:
    """The LLM stages an ingest runs with this method (its memory mode says)."""
    return modes.for_profile(profile).stages(profile)


_PER_EPISODE = {
    "narration": NARRATION_PER_EPISODE,
    "integration": INTEGRATION_PER_EPISODE,
    "prediction": PREDICTION_PER_EPISODE,
    "distillation": DISTILLATION_PER_EPISODE,
    "consolidation": CONSOLIDATION_PER_EPISODE,
    "summary": SUMMARY_PER_EPISODE,
    "note": FACTS_PER_EPISODE,
    "linking": FACTS_PER_EPISODE,
}


def _windows(messages: int, window: int) -> int:
    if messages <= 0:
        return 0
    # A window shorter than two episodes is usually one group, and a window's
    # only group is never carried, so such a window moves on by all of itself.
    step = window - CARRIED_PER_WINDOW if window >= 2 * CARRIED_PER_WINDOW else window
    carried = window - step
    return math.ceil(max(messages - carried, 1) / step)


def _share(run: tuple[str, ...]) -> tuple[float, float, float]:
    """The part of the reference run's prompt tokens, output tokens and seconds these stages account for."""
    reference = [_STAGE_COST[s] for s in measured.STAGES]
    chosen = [_STAGE_COST[s] for s in run]
    return (
        sum(s.prompt_tokens for s in chosen) / sum(s.prompt_tokens for s in reference),
        sum(s.output_tokens for s in chosen) / sum(s.output_tokens for s in reference),
        sum(s.seconds for s in chosen) / sum(s.seconds for s in reference),
    )


def estimate(messages: int, characters: int, *, window: int, profile: Profile, rates: Rates) -> Estimate:
    """The cost of making episodes of ``messages`` messages holding ``characters`` characters."""
    run = stages(profile)
    if not modes.for_profile(profile).makes_episodes:
        windows = episodes = 0
        calls = modes.for_profile(profile).message_calls(messages)
    else:
        windows = _windows(messages, window)
        episodes = math.ceil(messages / MESSAGES_PER_EPISODE) if messages else 0
        calls = {"partition": round(windows * PARTITION_PER_WINDOW)} if "partition" in run else {}
        calls.update({s: int(episodes * _PER_EPISODE[s] + 0.5) for s in run if s != "partition"})
    # Rates from this database were measured with this very method (a database
    # never mixes methods); others come from a default-method run, so the
    # stages this method skips (or adds) are taken out (or put in).
    prompt_share, output_share, time_share = (1.0, 1.0, 1.0) if rates.source == "this database" else _share(run)
    return Estimate(
        messages=messages,
        characters=characters,
        windows=windows,
        episodes=episodes,
        calls=calls,
        prompt_tokens=round(characters * rates.prompt_tokens_per_char * prompt_share),
        output_tokens=round(characters * rates.output_tokens_per_char * output_share),
        seconds=characters * rates.seconds_per_char * time_share,
        rates=rates,
    )
