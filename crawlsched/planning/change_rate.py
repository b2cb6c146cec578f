"""What a job's crawls say about how often its page changes: a belief over its change rate.

A crawl only tells whether the page changed at least once since the previous crawl, not how
many times. For a page that changes as a Poisson process of rate λ, a crawl `t` seconds after
the previous one sees a change with probability `1 - exp(-λ t)` and none with `exp(-λ t)`;
Cho & Garcia-Molina estimate λ from such counts. Here the estimate is the exact Bayesian one on
a fixed grid: the belief is a weight per candidate rate (`GRID_MEANS_S`: mean times between
changes from a minute to a year, log-spaced), each crawl multiplies every weight by the
probability of what it saw under that rate, and the estimate is the weighted mean rate. Because
the probability of a change grows with λ (and that of none shrinks), a crawl that saw a change
never gives a lower estimate than one that saw none from the same belief.

The weights are kept as logarithms, the largest 0, so they stay finite however long the
history; `memory` < 1 tempers the old weights before each crawl (the belief forgets, and
follows a page whose pace changes). Pure functions on lists of floats.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

GRID_SIZE = 24
_SHORTEST_MEAN_S, _LONGEST_MEAN_S = 60.0, 365 * 86400.0
GRID_MEANS_S = tuple(
    _SHORTEST_MEAN_S * (_LONGEST_MEAN_S / _SHORTEST_MEAN_S) ** (k / (GRID_SIZE - 1))
    for k in range(GRID_SIZE)
)
# The prior's spread, in natural-log units of the mean time between changes (one standard
# deviation: a factor e ≈ 2.7 either way): wide enough that a few crawls move it, narrow enough
# that one crawl does not swing the interval to a bound (benchmarks/bench_recrawl.py).
PRIOR_SPREAD = 1.0


def prior(mean_s: float) -> list[float]:
    """A belief whose mean rate is about one change every `mean_s` seconds (log-normal over the
    grid: the median mean time is e^(spread²/2) longer, as a log-normal rate's mean exceeds its
    median by that factor)."""
    centre = math.log(min(_LONGEST_MEAN_S, max(_SHORTEST_MEAN_S, mean_s))) + PRIOR_SPREAD**2 / 2
    weights = [-(((math.log(m) - centre) / PRIOR_SPREAD) ** 2) / 2 for m in GRID_MEANS_S]
    return _normalised(weights)


def is_belief(value: object) -> bool:
    """A stored belief as this module writes them: GRID_SIZE finite numbers, the largest 0
    (so that the mean rate never divides by a sum of weights that underflowed to 0)."""
    return (
        isinstance(value, Sequence)
        and len(value) == GRID_SIZE
        and all(
            isinstance(w, int | float) and not isinstance(w, bool) and -math.inf < w <= 0
            for w in value
        )
        and max(value) == 0
    )


def seconds_since(last: object, now: datetime, otherwise_s: float) -> float:
    """Seconds from the previous crawl (`last`) to `now`; `otherwise_s` when `last` is no
    comparable moment or not before `now`. At least a second, so a change has a chance."""
    seconds = None
    if isinstance(last, datetime) and (last.tzinfo is None) == (now.tzinfo is None):
        seconds = (now - last).total_seconds()
    return max(1.0, seconds if seconds and seconds > 0 else otherwise_s)


def updated(belief: Sequence[float], elapsed_s: float, changed: bool, memory: float) -> list[float]:
    """The belief after a crawl `elapsed_s` (> 0) after the previous one that saw a change or
    not; the old weights tempered by `memory` (in (0, 1]) first."""
    if changed:
        # log(1 - exp(-t/m)), accurate for t much smaller than m
        weights = [memory * w + math.log(-math.expm1(-elapsed_s / m))
                   for w, m in zip(belief, GRID_MEANS_S, strict=True)]  # fmt: skip
    else:
        weights = [memory * w - elapsed_s / m for w, m in zip(belief, GRID_MEANS_S, strict=True)]
    return _normalised(weights)


def _normalised(weights: list[float]) -> list[float]:
    top = max(weights)
    return [w - top for w in weights]


def mean_rate(belief: Sequence[float]) -> float:
    """The belief's mean change rate, per second (> 0)."""
    weights = [math.exp(w) for w in belief]
    return sum(w / m for w, m in zip(weights, GRID_MEANS_S, strict=True)) / sum(weights)
