"""Pages per second over a run: the ends of its pages counted in a bounded number of buckets.

Pure: offsets in seconds from the run's start go in, equal-width buckets come out. The width
is the smallest on a ladder of round figures (1 s, 2 s, 5 s … 1 h, then doubling) that keeps
the series within `max_buckets`, so a run of ten seconds and a run of ten days both draw as a
short series, and a run's frozen series stays a few hundred bytes on its document.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MAX_BUCKETS = 60

# Round widths an operator reads at a glance; past the last one, widths double.
WIDTHS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)


@dataclass(frozen=True)
class Series:
    width_s: float  # every bucket's width; bucket i covers [i*width, (i+1)*width)
    counts: tuple[int, ...]  # pages ended in each bucket

    @property
    def pages(self) -> int:
        return sum(self.counts)

    def rates(self) -> list[float]:
        """Pages per second in each bucket."""
        return [round(n / self.width_s, 3) for n in self.counts]


def bucket_width_s(span_s: float, max_buckets: int = MAX_BUCKETS) -> float:
    """The smallest ladder width whose buckets from 0 to `span_s` number at most max_buckets."""
    if max_buckets < 1:
        raise ValueError(f"max_buckets must be >= 1, got {max_buckets}")
    if not math.isfinite(span_s) or span_s < 0:
        raise ValueError(f"span_s must be a finite number >= 0, got {span_s}")
    for width in WIDTHS_S:
        if _buckets_for(span_s, width) <= max_buckets:
            return float(width)
    width = float(WIDTHS_S[-1])
    while _buckets_for(span_s, width) > max_buckets:
        width *= 2
    return width


def _buckets_for(span_s: float, width: float) -> int:
    return math.floor(span_s / width) + 1


def bucket(offsets_s: Sequence[float], max_buckets: int = MAX_BUCKETS) -> Series:
    """Count each page end in its bucket. An end before the start (clocks of two machines a
    little apart) counts in the first bucket: every page is counted once."""
    if any(not math.isfinite(o) for o in offsets_s):
        raise ValueError("offsets must be finite numbers of seconds")
    if not offsets_s:
        return Series(width_s=float(WIDTHS_S[0]), counts=())
    clamped = [max(o, 0.0) for o in offsets_s]
    width = bucket_width_s(max(clamped), max_buckets)
    counts = [0] * _buckets_for(max(clamped), width)
    for offset in clamped:
        counts[min(int(offset // width), len(counts) - 1)] += 1
    return Series(width_s=width, counts=tuple(counts))
