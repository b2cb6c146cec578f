"""What a finished attempt does to a job: next execution date, state, attempts, exhaustion."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from crawlsched.catalog import JobState


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    backoff_base_s: float = 60.0
    backoff_max_s: float = 6 * 3600.0

    def __post_init__(self) -> None:
        for name in ("backoff_base_s", "backoff_max_s"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be a finite number, got {getattr(self, name)}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.backoff_base_s <= 0:
            raise ValueError(f"backoff_base_s must be > 0, got {self.backoff_base_s}")
        if self.backoff_max_s < self.backoff_base_s:
            raise ValueError(
                f"backoff_max_s ({self.backoff_max_s}) must be >= backoff_base_s "
                f"({self.backoff_base_s})"
            )

    def delay_s(self, attempt: int) -> float:
        """Exponential backoff before attempt `attempt + 1`: base, 2·base, 4·base … capped."""
        if attempt < 1:
            raise ValueError(f"attempt must be >= 1, got {attempt}")
        # Cap the exponent first: 2**attempt overflows a float long before attempts run out.
        exponent = min(attempt - 1, 64)
        return min(self.backoff_max_s, self.backoff_base_s * 2.0**exponent)


class Outcome:
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # will be retried
    EXHAUSTED = "exhausted"  # failed for the last time: final
    EXPIRED = "expired"  # its dispatch lease ran out (worker died or hung): counts as a failure
    STARVED = "starved"  # no free resource: released untouched, not a failure


# A job whose run (or task) was stopped before it ran: given back untouched, not a failure.
# Kept out of `Outcome`, whose labels every run table shows: only a stopped run has any, and
# `run status` shows the column then.
STOPPED = "stopped"

# The outcomes each reporting phase writes, and so the only ones its report may count.
PHASE_OUTCOMES: dict[str, frozenset[str]] = {
    "crawl": frozenset({Outcome.SUCCEEDED, Outcome.FAILED, Outcome.EXHAUSTED, STOPPED}),
    "admit": frozenset({Outcome.STARVED}),
    "expire": frozenset({Outcome.EXPIRED}),
    "stop": frozenset({STOPPED}),
}

# Every outcome a run counts, in display order, with what it means to an operator.
OUTCOME_MEANINGS: dict[str, str] = {
    Outcome.SUCCEEDED: "crawled; results stored; the job is due again after its interval",
    Outcome.FAILED: "the crawl failed; retried later with exponential backoff",
    Outcome.EXHAUSTED: "failed for the last allowed time; left failed and flagged",
    Outcome.EXPIRED: "its worker died or hung past the dispatch lease; counts as a failed try",
    Outcome.STARVED: "waited past the bound for an account or node; given back untouched",
}


@dataclass(frozen=True)
class JobUpdate:
    job_id: Any
    outcome: str
    state: JobState
    attempt_count: int
    exhausted: bool
    execution_date: datetime | None  # None: leave it as it is
    error: str | None = None
    discovered: int = 0  # URLs the crawl found (the coordinator sums them from the jobs)
    items: Mapping[str, int] = field(default_factory=dict)  # new / changed / unchanged results
    cut: Mapping[str, int] = field(default_factory=dict)  # discoveries a bound refused


def after_success(
    job_id: Any, interval_s: float | None, now: datetime, discovered: int = 0
) -> JobUpdate:
    """A recurring job is due again one interval from now; a one-off job is done."""
    if interval_s:
        return JobUpdate(
            job_id,
            Outcome.SUCCEEDED,
            JobState.PENDING,
            0,
            False,
            now + timedelta(seconds=interval_s),
            discovered=discovered,
        )
    return JobUpdate(
        job_id, Outcome.SUCCEEDED, JobState.DONE, 0, False, None, discovered=discovered
    )


def after_failure(
    job_id: Any,
    attempt_count: int,
    now: datetime,
    policy: RetryPolicy,
    error: str,
    outcome: str = Outcome.FAILED,
) -> JobUpdate:
    """One more failed attempt: retry after a backoff, or stay failed and flagged exhausted."""
    attempts = max(attempt_count, 0) + 1
    if attempts >= policy.max_attempts:
        # A crawl failure's last attempt is reported as "exhausted"; other labels (expired) keep
        # theirs, so each reporter can read back exactly the outcomes it wrote.
        final = Outcome.EXHAUSTED if outcome == Outcome.FAILED else outcome
        return JobUpdate(job_id, final, JobState.FAILED, attempts, True, None, error)
    retry_at = now + timedelta(seconds=policy.delay_s(attempts))
    return JobUpdate(job_id, outcome, JobState.FAILED, attempts, False, retry_at, error)


def all_outcomes() -> list[str]:
    """Every outcome a history row can have, `stopped` included, sorted."""
    return sorted(
        [*(v for k, v in vars(Outcome).items() if k.isupper() and isinstance(v, str)), STOPPED]
    )
