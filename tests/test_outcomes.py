"""RetryPolicy and what a finished attempt does to a job (planning.outcomes)."""

import math
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.catalog import JobState
from crawlsched.planning.outcomes import (
    OUTCOME_MEANINGS,
    PHASE_OUTCOMES,
    REDO,
    STOPPED,
    Outcome,
    RedoPolicy,
    RetryPolicy,
    after_failure,
    after_machinery_failure,
    after_success,
    all_outcomes,
)
from tests.support.factories import NOW, utc_datetimes


@st.composite
def policies(draw):
    base = draw(st.floats(0.001, 3600, allow_nan=False))
    cap = draw(st.floats(base, 30 * 24 * 3600, allow_nan=False))
    return RetryPolicy(draw(st.integers(1, 20)), base, cap)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": -3}, "max_attempts"),
        ({"backoff_base_s": 0}, "backoff_base_s"),
        ({"backoff_base_s": -1.0}, "backoff_base_s"),
        ({"backoff_base_s": 10.0, "backoff_max_s": 9.0}, "backoff_max_s"),
    ],
)
def test_retry_policy_rejects_bad_fields_naming_them(kwargs, field):
    with pytest.raises(ValueError, match=field):
        RetryPolicy(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"backoff_base_s": math.nan}, "backoff_base_s"),
        ({"backoff_max_s": math.nan}, "backoff_max_s"),
        ({"backoff_max_s": math.inf}, "backoff_max_s"),
    ],
)
def test_retry_policy_rejects_non_finite_backoff(kwargs, field):
    with pytest.raises(ValueError, match=field):
        RetryPolicy(**kwargs)


def test_retry_policy_delay_table():
    policy = RetryPolicy(max_attempts=5, backoff_base_s=60, backoff_max_s=300)
    assert [policy.delay_s(a) for a in range(1, 6)] == [60, 120, 240, 300, 300]
    with pytest.raises(ValueError, match="attempt"):
        policy.delay_s(0)


@settings(max_examples=100)
@given(policies(), st.integers(1, 10_000))
def test_retry_policy_delay_is_monotone_capped_and_starts_at_base(policy, attempt):
    delay = policy.delay_s(attempt)
    assert policy.delay_s(1) == policy.backoff_base_s
    assert policy.backoff_base_s <= delay <= policy.backoff_max_s
    assert policy.delay_s(attempt + 1) >= delay
    assert math.isfinite(delay)


@given(policies(), st.integers(10**3, 10**18))
def test_retry_policy_delay_of_huge_attempts_is_the_cap(policy, attempt):
    assert policy.delay_s(attempt) == pytest.approx(policy.backoff_max_s)


@given(utc_datetimes(), st.floats(1, 30 * 24 * 3600))
def test_after_success_of_recurring_job_is_due_one_interval_later(now, interval_s):
    update = after_success("job-1", interval_s, now)
    assert (update.job_id, update.outcome) == ("job-1", Outcome.SUCCEEDED)
    assert (update.state, update.attempt_count, update.exhausted) == (JobState.PENDING, 0, False)
    assert update.execution_date == now + timedelta(seconds=interval_s)


@pytest.mark.parametrize("interval_s", [None, 0])
def test_after_success_of_one_off_job_is_done_and_keeps_its_date(interval_s):
    update = after_success("job-1", interval_s, NOW)
    assert (update.outcome, update.state) == (Outcome.SUCCEEDED, JobState.DONE)
    assert (update.attempt_count, update.exhausted, update.execution_date) == (0, False, None)


@settings(max_examples=100)
@given(policies(), st.integers(0, 30), utc_datetimes(), st.sampled_from(["x", ""]))
def test_after_failure_counts_the_attempt_and_backs_off_or_exhausts(policy, before, now, error):
    update = after_failure("job-1", before, now, policy, error)

    assert update.attempt_count == before + 1
    assert update.state == JobState.FAILED
    assert update.error == error
    if before + 1 >= policy.max_attempts:
        assert update.exhausted
        assert update.outcome == Outcome.EXHAUSTED
        assert update.execution_date is None
    else:
        assert not update.exhausted
        assert update.outcome == Outcome.FAILED
        assert update.execution_date == now + timedelta(seconds=policy.delay_s(before + 1))


def test_after_failure_table():
    policy = RetryPolicy(max_attempts=3, backoff_base_s=60, backoff_max_s=3600)
    first = after_failure("j", 0, NOW, policy, "boom")
    second = after_failure("j", first.attempt_count, NOW, policy, "boom")
    third = after_failure("j", second.attempt_count, NOW, policy, "boom")

    assert [(u.attempt_count, u.exhausted) for u in (first, second, third)] == [
        (1, False),
        (2, False),
        (3, True),
    ]
    assert first.execution_date == NOW + timedelta(seconds=60)
    assert second.execution_date == NOW + timedelta(seconds=120)
    # A negative count in a damaged document still counts as no attempt yet.
    assert after_failure("j", -4, NOW, policy, "boom").attempt_count == 1


@st.composite
def redo_policies(draw):
    base = draw(st.floats(0.001, 600, allow_nan=False))
    return RedoPolicy(draw(st.integers(1, 10)), base, draw(st.floats(base, 3600, allow_nan=False)))


@given(redo_policies(), st.integers(-3, 20), st.integers(-3, 12), utc_datetimes())
def test_a_machinery_failure_is_no_attempt_and_goes_back_to_its_run_until_its_tries_run_out(
    policy, attempts, tries, now
):
    update = after_machinery_failure("j", "run-1", attempts, tries, now, policy, "worker died")
    tries_now = max(tries, 0) + 1
    # The page's own attempts are untouched either way, and it is never flagged exhausted.
    assert (update.attempt_count, update.exhausted) == (max(attempts, 0), False)
    assert update.error == "worker died"
    if tries_now >= policy.tries_per_run:
        # Given up for this run, planned again by the next firing at once.
        assert (update.outcome, update.state) == (Outcome.EXPIRED, JobState.FAILED)
        assert (update.execution_date, update.redo_run, update.redo_tries) == (None, None, 0)
    else:
        assert (update.outcome, update.state) == (REDO, JobState.PENDING)
        assert (update.redo_run, update.redo_tries) == ("run-1", tries_now)
        delay = (update.execution_date - now).total_seconds()
        assert policy.backoff_base_s - 1e-3 <= delay <= policy.backoff_max_s + 1e-3


def test_machinery_tries_back_off_and_the_last_one_gives_up():
    policy = RedoPolicy(tries_per_run=3, backoff_base_s=5, backoff_max_s=300)
    first = after_machinery_failure("j", "r", 0, 0, NOW, policy, "x")
    second = after_machinery_failure("j", "r", 0, 1, NOW, policy, "x")
    third = after_machinery_failure("j", "r", 0, 2, NOW, policy, "x")
    assert first.execution_date == NOW + timedelta(seconds=5)
    assert second.execution_date == NOW + timedelta(seconds=10)
    assert (third.outcome, third.redo_run) == (Outcome.EXPIRED, None)


@pytest.mark.parametrize("bad", [{"tries_per_run": 0}, {"backoff_base_s": 0}])
def test_redo_policy_refuses_nonsense(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        RedoPolicy(**bad)


@given(st.integers(10**6, 10**15))
def test_after_failure_with_huge_attempt_count_does_not_overflow(before):
    policy = RetryPolicy(max_attempts=10**16)
    update = after_failure("j", before, NOW, policy, "boom")
    assert update.execution_date == NOW + timedelta(seconds=policy.backoff_max_s)


def test_every_outcome_label_is_the_word_history_rows_store():
    # The labels are stored in history rows and typed by operators (`?outcome=`, run tables).
    assert all_outcomes() == [
        "exhausted",
        "expired",
        "failed",
        "given_up",
        "starved",
        "stopped",
        "succeeded",
    ]
    assert (Outcome.SUCCEEDED, Outcome.FAILED, STOPPED) == ("succeeded", "failed", "stopped")


def test_each_phase_reports_only_the_outcomes_it_writes():
    phases = {phase: set(labels) for phase, labels in PHASE_OUTCOMES.items()}
    assert phases == {
        "crawl": {"succeeded", "failed", "exhausted", "given_up", "stopped"},
        "admit": {"starved"},
        "expire": {"expired"},
        "stop": {"stopped"},
    }
    # Every outcome a run counts has a meaning to show, in the order runs show them; stopped
    # has its own column.
    assert list(OUTCOME_MEANINGS) == [
        "succeeded",
        "failed",
        "exhausted",
        "expired",
        "given_up",
        "starved",
    ]
    assert all(meaning.strip() for meaning in OUTCOME_MEANINGS.values())


def test_retry_policy_defaults_are_five_attempts_from_a_minute_to_six_hours():
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.backoff_base_s, policy.backoff_max_s) == (5, 60, 21_600)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_attempts": 0}, "max_attempts must be >= 1, got 0"),
        ({"backoff_base_s": 0}, "backoff_base_s must be > 0, got 0"),
        ({"backoff_base_s": math.inf}, "backoff_base_s must be a finite number, got inf"),
        ({"backoff_max_s": math.nan}, "backoff_max_s must be a finite number, got nan"),
        (
            {"backoff_base_s": 10.0, "backoff_max_s": 9.0},
            "backoff_max_s (9.0) must be >= backoff_base_s (10.0)",
        ),
    ],
)
def test_retry_policy_refusal_messages(kwargs, message):
    with pytest.raises(ValueError) as caught:
        RetryPolicy(**kwargs)
    assert str(caught.value) == message


def test_retry_policy_takes_one_attempt_and_a_fixed_delay():
    # The smallest policy: one attempt, base == cap (no growth).
    policy = RetryPolicy(max_attempts=1, backoff_base_s=30, backoff_max_s=30)
    assert [policy.delay_s(a) for a in (1, 2, 50)] == [30, 30, 30]
    with pytest.raises(ValueError, match=r"^attempt must be >= 1, got 0$"):
        policy.delay_s(0)


def test_retry_policy_delay_doubles_up_to_the_64th_doubling_then_stays():
    # A base so small that the cap is never reached: the exponent itself is capped (2**attempt
    # would overflow a float), after 64 doublings.
    policy = RetryPolicy(max_attempts=10**6, backoff_base_s=2.0**-80, backoff_max_s=1.0)
    assert policy.delay_s(64) == 2.0**-17
    assert policy.delay_s(65) == 2.0**-16
    assert policy.delay_s(66) == policy.delay_s(10**6) == 2.0**-16


@pytest.mark.parametrize("interval_s", [None, 0, 60])
def test_after_success_carries_the_discovered_count(interval_s):
    update = after_success("job-1", interval_s, NOW, discovered=7)
    assert update.job_id == "job-1"
    assert (update.discovered, update.error, update.items, update.cut) == (7, None, {}, {})
    assert after_success("job-1", interval_s, NOW).discovered == 0


def test_after_failure_of_the_last_attempt_keeps_the_error():
    policy = RetryPolicy(max_attempts=2)
    update = after_failure("j", 1, NOW, policy, "boom")
    assert (update.job_id, update.outcome, update.exhausted, update.error) == (
        "j",
        Outcome.EXHAUSTED,
        True,
        "boom",
    )
    # A retried attempt is left failed (its execution date says when it is due again).
    retried = after_failure("j", 0, NOW, policy, "boom")
    assert (retried.job_id, retried.state, retried.discovered) == ("j", JobState.FAILED, 0)
