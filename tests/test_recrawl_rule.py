"""The adaptive recrawl rule (`planning.recrawl`): properties, a few readable cases, and a
simulation of pages changing at known rates over simulated weeks (pure: the clock is a number)."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.catalog import JobState
from crawlsched.planning.outcomes import RetryPolicy, after_failure, after_success
from crawlsched.planning.recrawl import (
    Evidence,
    RecrawlPolicy,
    after_crawl,
    draw_for,
    jittered,
    next_interval,
    policy_of,
    revisit,
)

NOW = datetime(2026, 3, 1, tzinfo=UTC)
HOUR, DAY = 3600.0, 86400.0

seconds = st.floats(min_value=1.0, max_value=1e8, allow_nan=False, allow_infinity=False)
counts = st.integers(min_value=0, max_value=1000)
evidences = st.builds(Evidence, counts, counts, counts)
draws = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


@st.composite
def policies(draw, adaptive: bool = True) -> RecrawlPolicy:
    low = draw(st.floats(min_value=1.0, max_value=1e7, allow_nan=False))
    return RecrawlPolicy(
        adaptive=adaptive,
        min_interval_s=low,
        max_interval_s=low * draw(st.floats(min_value=1.0, max_value=1e4)),
        inc_rate=draw(st.floats(min_value=0.01, max_value=10.0)),
        dec_rate=draw(st.floats(min_value=0.01, max_value=0.99)),
        jitter=draw(st.floats(min_value=0.0, max_value=0.99)),
    )


# -- properties ---------------------------------------------------------------------------------


@given(policies(), seconds, st.none() | seconds, evidences, draws)
def test_next_interval_never_leaves_the_bounds_with_or_without_jitter(
    policy, configured, current, evidence, draw
):
    interval = next_interval(configured, current, evidence, policy)
    assert policy.min_interval_s <= interval <= policy.max_interval_s
    assert policy.min_interval_s <= jittered(interval, policy, draw) <= policy.max_interval_s


@given(policies(), seconds, st.none() | seconds, evidences, counts, counts)
def test_more_change_never_gives_a_longer_interval(
    policy, configured, current, evidence, more_new, more_changed
):
    more = Evidence(evidence.new + more_new, evidence.changed + more_changed, evidence.unchanged)
    assert next_interval(configured, current, more, policy) <= next_interval(
        configured, current, evidence, policy
    )


@given(policies(), seconds, st.none() | seconds, evidences, st.integers(0, 1000))
def test_an_unchanged_item_seen_changed_never_gives_a_longer_interval(
    policy, configured, current, evidence, k
):
    moved = min(k, evidence.unchanged)
    more = Evidence(evidence.new, evidence.changed + moved, evidence.unchanged - moved)
    assert next_interval(configured, current, more, policy) <= next_interval(
        configured, current, evidence, policy
    )


@given(policies(adaptive=False), seconds, st.none() | seconds, evidences, draws)
def test_a_fixed_policy_returns_the_configured_interval_unjittered(
    policy, configured, current, evidence, draw
):
    assert next_interval(configured, current, evidence, policy) == configured
    assert jittered(configured, policy, draw) == configured
    found = revisit(configured, {"interval_s": current}, evidence, policy, NOW, lambda v: draw)
    assert found.interval_s == found.delay_s == configured


@given(policies(), seconds, st.lists(evidences, max_size=30))
def test_the_state_counts_visits_and_changes_and_the_jitter_never_accumulates(
    policy, configured, history
):
    state = None
    expected = None
    for visit, evidence in enumerate(history, start=1):
        found = revisit(configured, state, evidence, policy, NOW, lambda v: 0.999)
        expected = next_interval(configured, expected, evidence, policy)
        assert found.interval_s == expected  # the stored interval is the unjittered one
        state = found.state
        assert state["visits"] == visit
    assert (state or {}).get("changes", 0) == sum(e.saw_change for e in history)


def test_draws_are_deterministic_per_job_and_visit_and_spread_out():
    assert draw_for("oid:1", 3) == draw_for("oid:1", 3)
    spread = {round(draw_for(f"oid:{i}", 1), 6) for i in range(200)}
    assert len(spread) == 200 and all(0 <= d < 1 for d in spread)


# -- cases --------------------------------------------------------------------------------------

ADAPTIVE = RecrawlPolicy(
    adaptive=True, min_interval_s=HOUR, max_interval_s=30 * DAY, inc_rate=0.4, dec_rate=0.2
)


@pytest.mark.parametrize(
    ("current", "evidence", "expected"),
    [
        (DAY, Evidence(new=1), 0.8 * DAY),  # something new: 20 % sooner
        (DAY, Evidence(changed=2, unchanged=5), 0.8 * DAY),  # something changed
        (DAY, Evidence(unchanged=3), 1.4 * DAY),  # all seen before: 40 % later
        (DAY, Evidence(), DAY),  # nothing saved: no evidence, no change
        (HOUR, Evidence(new=1), HOUR),  # never under the minimum
        (29 * DAY, Evidence(unchanged=1), 30 * DAY),  # never over the maximum
        (None, Evidence(unchanged=1), 2 * DAY * 1.4),  # first visit: from the configured 2 d
    ],
)
def test_next_interval_cases(current, evidence, expected):
    assert next_interval(2 * DAY, current, evidence, ADAPTIVE) == pytest.approx(expected)


def test_jitter_moves_at_most_the_fraction_each_way():
    policy = RecrawlPolicy(adaptive=True, min_interval_s=1, max_interval_s=1e9, jitter=0.1)
    assert jittered(DAY, policy, 0.0) == pytest.approx(0.9 * DAY)
    assert jittered(DAY, policy, 0.5) == pytest.approx(DAY)
    assert jittered(DAY, policy, 0.999999) == pytest.approx(1.1 * DAY)


def test_policy_of_keeps_fixed_unless_the_media_says_adaptive():
    defaults = RecrawlPolicy(inc_rate=0.5, dec_rate=0.3, jitter=0.05)
    assert policy_of(None, defaults) == defaults
    assert policy_of({"min_interval_s": 60.0}, defaults).adaptive is False
    mine = policy_of({"adaptive": True, "max_interval_s": 7 * DAY, "jitter": None}, defaults)
    assert (mine.adaptive, mine.max_interval_s, mine.inc_rate, mine.jitter) == (
        True, 7 * DAY, 0.5, 0.05,
    )  # fmt: skip
    with pytest.raises(ValueError, match="max_interval_s"):
        policy_of({"adaptive": True, "min_interval_s": 10.0, "max_interval_s": 5.0}, defaults)


@pytest.mark.parametrize(
    ("field", "value"),
    [("min_interval_s", 0), ("dec_rate", 1.0), ("inc_rate", 0), ("jitter", 1.0),
     ("max_interval_s", math.inf)],
)  # fmt: skip
def test_a_bad_policy_is_refused_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        RecrawlPolicy(adaptive=True, **{field: value})


def test_after_crawl_adapts_only_a_recurring_success_and_leaves_fixed_dates_alone():
    job = {"_id": "j", "interval_s": DAY}
    success = dataclasses.replace(after_success("j", DAY, NOW), items={"unchanged": 4})
    adapted = after_crawl(success, job, ADAPTIVE, NOW)
    assert adapted.execution_date == NOW + timedelta(days=1.4)
    assert adapted.recrawl["interval_s"] == pytest.approx(1.4 * DAY)
    assert adapted.recrawl["last_items"] == {"new": 0, "changed": 0, "unchanged": 4}

    fixed = after_crawl(success, job, RecrawlPolicy(), NOW)
    assert fixed.execution_date == success.execution_date == NOW + timedelta(days=1)
    assert fixed.recrawl["mode"] == "fixed" and fixed.recrawl["visits"] == 1

    one_off = after_success("j", None, NOW)
    assert one_off.state == JobState.DONE
    assert after_crawl(one_off, {"_id": "j"}, ADAPTIVE, NOW) == one_off
    failed = after_failure("j", 0, NOW, RetryPolicy(), "boom")
    assert after_crawl(failed, job, ADAPTIVE, NOW) == failed


# -- simulation ---------------------------------------------------------------------------------


def simulate(mean_change_s: float | None, weeks: int, seed: int) -> list[float]:
    """One page crawled under the adaptive rule for `weeks` of simulated time; it changes as a
    Poisson process with that mean time between changes (None: never). Returns the interval
    after each visit."""
    rng = random.Random(seed)
    policy = RecrawlPolicy(adaptive=True, min_interval_s=HOUR, max_interval_s=30 * DAY, jitter=0.1)
    t, end, state, intervals = 0.0, weeks * 7 * DAY, None, []
    next_change = rng.expovariate(1 / mean_change_s) if mean_change_s else math.inf
    while t < end:
        changed = next_change <= t
        while next_change <= t:
            next_change += rng.expovariate(1 / mean_change_s)
        evidence = Evidence(changed=1) if changed else Evidence(unchanged=1)
        moment = NOW + timedelta(seconds=t)
        found = revisit(DAY, state, evidence, policy, moment, lambda v: draw_for(seed, v))
        state = found.state
        intervals.append(found.interval_s)
        t += found.delay_s
    return intervals


def test_simulated_pages_converge_to_the_pace_they_change_at():
    # Given pages that change about every 2 hours, every 2 days, and never, first crawled daily
    fast = [simulate(2 * HOUR, weeks=8, seed=s) for s in range(5)]
    slow = [simulate(2 * DAY, weeks=8, seed=s) for s in range(5)]
    static = simulate(None, weeks=26, seed=0)

    def settled(intervals: list[float]) -> float:
        tail = intervals[len(intervals) // 2 :]
        return sum(tail) / len(tail)

    # Then the fast pages settle near their pace (the equilibrium is about 0.9 of the mean
    # time between changes), far under the daily start...
    for intervals in fast:
        assert HOUR <= settled(intervals) <= 4 * HOUR
    # ... pages changing every 2 days settle between a day and 5 days ...
    for intervals in slow:
        assert DAY <= settled(intervals) <= 5 * DAY
    # ... and the static page grows, never shrinking, to the maximum
    assert all(b >= a for a, b in itertools.pairwise(static))
    assert static[-1] == 30 * DAY
