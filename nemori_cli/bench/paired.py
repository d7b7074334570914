"""Paired comparisons of two systems over the same questions: mean difference, bootstrap interval, wins and losses.

With 40-60 questions a 5-point difference in mean F1 can be luck, and two
systems answer the same questions, so their scores are compared pairwise:
the difference per question, its mean, and a 95% interval from resampling
the questions (the paired bootstrap, percentile method). A claim that one
system beats another cites an interval that excludes 0.

Written here rather than taken from scipy.stats.bootstrap: scipy is not a
dependency, and the paired percentile bootstrap is a dozen lines whose
seed and resample count the report can state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

RESAMPLES = 10_000
SEED = 20261205  # fixed, so a report rebuilt from the same records gives the same interval
TIE = 1e-9  # scores closer than this are a tie
CLEAR = 0.2  # a win or loss "by more than 0.2 F1", as the issue tracker's readings count them


@dataclass(frozen=True)
class Paired:
    system: str
    against: str
    questions: int  # answered by both
    mean_difference: float  # system minus against, in score units (0..1)
    low: float  # 95% interval
    high: float
    wins: int
    ties: int
    losses: int
    clear_wins: int  # by more than CLEAR
    clear_losses: int

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def as_dict(self) -> dict:
        return {
            "system": self.system,
            "against": self.against,
            "questions": self.questions,
            "mean_difference": self.mean_difference,
            "ci95": [self.low, self.high],
            "excludes_zero": self.excludes_zero,
            "wins": self.wins,
            "ties": self.ties,
            "losses": self.losses,
            "clear_wins": self.clear_wins,
            "clear_losses": self.clear_losses,
            "resamples": RESAMPLES,
            "seed": SEED,
        }


def bootstrap(differences: list[float], resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the mean over resampled questions."""
    n = len(differences)
    if n == 0:
        return 0.0, 0.0
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(differences, k=n)) / n for _ in range(resamples))
    return means[int(0.025 * (resamples - 1))], means[int(0.975 * (resamples - 1))]


def compare(system: str, against: str, mine: dict, theirs: dict) -> Paired | None:
    """``mine``/``theirs``: question key -> score. Only the questions both answered count; None if there are none."""
    keys = sorted(set(mine) & set(theirs), key=str)
    if not keys:
        return None
    differences = [float(mine[k]) - float(theirs[k]) for k in keys]
    low, high = bootstrap(differences)
    return Paired(
        system,
        against,
        len(keys),
        sum(differences) / len(differences),
        low,
        high,
        wins=sum(d > TIE for d in differences),
        ties=sum(abs(d) <= TIE for d in differences),
        losses=sum(d < -TIE for d in differences),
        clear_wins=sum(d > CLEAR for d in differences),
        clear_losses=sum(d < -CLEAR for d in differences),
    )
