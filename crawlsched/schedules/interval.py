"""Fixed-interval schedules anchored on a start time (like APScheduler's IntervalTrigger)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class IntervalSchedule:
    anchor: datetime  # fire times are anchor + k·interval
    interval_s: float

    # Below a millisecond the datetime arithmetic (µs resolution, ms in MongoDB) cannot step.
    MIN_INTERVAL_S = 0.001

    def __post_init__(self) -> None:
        if not math.isfinite(self.interval_s) or self.interval_s < self.MIN_INTERVAL_S:
            raise ValueError(
                f"interval_s must be finite and >= {self.MIN_INTERVAL_S}, got {self.interval_s}"
            )
        if self.anchor.tzinfo is None:
            raise ValueError("anchor must be timezone-aware")

    def next_after(self, moment: datetime) -> datetime:
        """The first fire time strictly after `moment`."""
        if moment < self.anchor:
            return self.anchor
        elapsed = (moment - self.anchor).total_seconds()
        k = math.floor(elapsed / self.interval_s) + 1
        candidate = self.anchor + timedelta(seconds=k * self.interval_s)
        # Float rounding may land a hair on the wrong side of `moment`; correct by one step.
        while candidate <= moment:
            candidate += timedelta(seconds=self.interval_s)
        return candidate

    def missed_between(self, fired_at: datetime, now: datetime) -> int:
        """How many fire times after `fired_at` were due by `now` (a late tick skips them)."""
        if now <= fired_at:
            return 0
        return max(0, math.floor((now - fired_at).total_seconds() / self.interval_s))
