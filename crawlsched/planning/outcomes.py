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


@dataclass(frozen=True)
class RedoPolicy:
    """How often one run starts a page again when the machinery (not the page) failed it: a
    worker killed, a dispatch reclaimed, a store or broker lost. Separate from `RetryPolicy`,
    which counts the page's own failures across runs: a machinery failure is no attempt."""

    tries_per_run: int = 3
    backoff_base_s: float = 5.0
    backoff_max_s: float = 300.0

    def __post_init__(self) -> None:
        if self.tries_per_run < 1:
            raise ValueError(f"tries_per_run must be >= 1, got {self.tries_per_run}")
        RetryPolicy(self.tries_per_run, self.backoff_base_s, self.backoff_max_s)  # same checks

    def delay_s(self, tries: int) -> float:
        return RetryPolicy(self.tries_per_run, self.backoff_base_s, self.backoff_max_s).delay_s(
            tries
        )


class Outcome:
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # will be retried
    EXHAUSTED = "exhausted"  # failed for the last time: final
    # The machinery failed the page on every try the run allows (its worker died or hung past
    # the dispatch lease each time): given up for this run, with the reason. Not the page's
    # fault: its attempt count is untouched, and the next firing plans it as usual.
    EXPIRED = "expired"
    # The crawl gave the page up for this run, with the reason: its host answered it 429 or 503
    # more often than `CRAWLSCHED_HOST_REFUSALS_PER_PAGE` allows. Not the page's fault either.
    GIVEN_UP = "given_up"
    STARVED = "starved"  # no free resource: released untouched, not a failure


# A job the machinery failed, given back to its run to be crawled again after a backoff. Not
# an end: no report counts it, the run keeps waiting for it.
REDO = "redo"


# A job whose run (or task) was stopped before it ran: given back untouched, not a failure.
# Kept out of `Outcome`, whose labels every run table shows: only a stopped run has any, and
# `run status` shows the column then.
STOPPED = "stopped"

# The outcomes each reporting phase writes, and so the only ones its report may count.
PHASE_OUTCOMES: dict[str, frozenset[str]] = {
    "crawl": frozenset(
        {Outcome.SUCCEEDED, Outcome.FAILED, Outcome.EXHAUSTED, Outcome.GIVEN_UP, STOPPED}
    ),
    "admit": frozenset({Outcome.STARVED}),
    "expire": frozenset({Outcome.EXPIRED}),
    "stop": frozenset({STOPPED}),
}

# Every outcome a run counts, in display order, with what it means to an operator.
OUTCOME_MEANINGS: dict[str, str] = {
    Outcome.SUCCEEDED: "crawled; results stored; the job is due again after its interval",
    Outcome.FAILED: "the crawl failed; retried later with exponential backoff",
    Outcome.EXHAUSTED: "failed for the last allowed time; left failed and flagged",
    Outcome.EXPIRED: "its worker died or hung on every try the run allows; given up (incomplete)",
    Outcome.GIVEN_UP: "its host kept answering 429/503; given up for this run (incomplete)",
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
    # Set: the job goes back to this run for another try (`REDO`); `redo_tries` counts the
    # tries of this run the machinery failed so far.
    redo_run: str | None = None
    redo_tries: int = 0
    # Set: the job's new `recrawl` state (its adapted interval and the evidence behind it).
    recrawl: Mapping[str, Any] | None = None


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
    job_id: Any, attempt_count: int, now: datetime, policy: RetryPolicy, error: str
) -> JobUpdate:
    """One more failed attempt of the page itself: retry after a backoff, or stay failed and
    flagged exhausted."""
    attempts = max(attempt_count, 0) + 1
    if attempts >= policy.max_attempts:
        return JobUpdate(job_id, Outcome.EXHAUSTED, JobState.FAILED, attempts, True, None, error)
    retry_at = now + timedelta(seconds=policy.delay_s(attempts))
    return JobUpdate(job_id, Outcome.FAILED, JobState.FAILED, attempts, False, retry_at, error)


def after_machinery_failure(
    job_id: Any,
    run_id: str,
    attempt_count: int,
    tries_in_run: int,
    now: datetime,
    policy: RedoPolicy,
    reason: str,
) -> JobUpdate:
    """The machinery failed this try of the job (not the page): back to its run after a
    backoff, or — its tries in this run used up — given up as `expired` with the reason. The
    attempt count (the page's own failures) is left as it was either way."""
    tries = max(tries_in_run, 0) + 1
    attempts = max(attempt_count, 0)
    if tries >= policy.tries_per_run:
        # Failed state, execution date untouched: the next firing plans it again at once.
        return JobUpdate(job_id, Outcome.EXPIRED, JobState.FAILED, attempts, False, None, reason)
    retry_at = now + timedelta(seconds=policy.delay_s(tries))
    return JobUpdate(
        job_id,
        REDO,
        JobState.PENDING,
        attempts,
        False,
        retry_at,
        reason,
        redo_run=run_id,
        redo_tries=tries,
    )


def all_outcomes() -> list[str]:
    """Every outcome a history row can have, `stopped` included, sorted."""
    return sorted(
        [*(v for k, v in vars(Outcome).items() if k.isupper() and isinstance(v, str)), STOPPED]
    )
