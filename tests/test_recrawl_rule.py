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
from crawlsched.planning import change_rate
from crawlsched.planning.outcomes import RetryPolicy, after_failure, after_success
from crawlsched.planning.recrawl import (
    ESTIMATE,
    STEPS,
    Evidence,
    RecrawlPolicy,
    after_crawl,
    draw_for,
    estimated_interval,
    jittered,
    next_interval,
    policy_of,
    revisit,
    same_direction,
)

NOW = datetime(2026, 3, 1, tzinfo=UTC)
HOUR, DAY = 3600.0, 86400.0

seconds = st.floats(min_value=1.0, max_value=1e8, allow_nan=False, allow_infinity=False)
counts = st.integers(min_value=0, max_value=1000)
evidences = st.builds(Evidence, counts, counts, counts)
draws = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


@st.composite
def policies(draw, adaptive: bool = True, method: str | None = None) -> RecrawlPolicy:
    low = draw(st.floats(min_value=1.0, max_value=1e7, allow_nan=False))
    return RecrawlPolicy(
        adaptive=adaptive,
        min_interval_s=low,
        max_interval_s=low * draw(st.floats(min_value=1.0, max_value=1e4)),
        inc_rate=draw(st.floats(min_value=0.01, max_value=10.0)),
        dec_rate=draw(st.floats(min_value=0.01, max_value=0.99)),
        jitter=draw(st.floats(min_value=0.0, max_value=0.99)),
        method=method or draw(st.sampled_from([ESTIMATE, STEPS])),
        interval_per_mean=draw(st.floats(min_value=0.01, max_value=100.0)),
        memory=draw(st.floats(min_value=0.01, max_value=1.0)),
    )


# a job's past: what each crawl saw, and how long after the previous one it came (seconds)
histories = st.lists(st.tuples(evidences, seconds), max_size=20)


def replayed(configured: float, history, policy: RecrawlPolicy) -> tuple[dict | None, datetime]:
    """The `recrawl` state after crawls that saw `history`, and the moment of the last one."""
    state, now = None, NOW
    for evidence, after_s in history:
        now += timedelta(seconds=after_s)
        state = revisit(configured, state, evidence, policy, now, lambda v: 0.5).state
    return state, now


# -- properties ---------------------------------------------------------------------------------


@given(policies(), seconds, st.none() | seconds, evidences, draws)
def test_next_interval_never_leaves_the_bounds_with_or_without_jitter(
    policy, configured, current, evidence, draw
):
    interval = next_interval(configured, current, evidence, policy)
    assert policy.min_interval_s <= interval <= policy.max_interval_s
    assert policy.min_interval_s <= jittered(interval, policy, draw) <= policy.max_interval_s


@given(policies(), seconds, histories, evidences, seconds, draws)
def test_revisit_never_leaves_the_bounds_whatever_the_past(
    policy, configured, history, evidence, after_s, draw
):
    state, then = replayed(configured, history, policy)
    found = revisit(configured, state, evidence, policy, then + timedelta(seconds=after_s),
                    lambda v: draw)  # fmt: skip
    assert policy.min_interval_s <= found.interval_s <= policy.max_interval_s
    assert policy.min_interval_s <= found.delay_s <= policy.max_interval_s


anything = st.none() | st.booleans() | st.text(max_size=3) | st.floats() | st.datetimes()
junk_states = st.fixed_dictionaries(
    {},
    optional={
        "interval_s": anything,
        "visits": anything | counts,
        "changes": anything | counts,
        "rate_belief": anything
        | st.lists(st.floats(), min_size=change_rate.GRID_SIZE, max_size=change_rate.GRID_SIZE),
        "updated_at": anything,
    },
)


@given(policies(), seconds, junk_states, evidences)
def test_any_stored_state_gives_an_interval_within_the_bounds_and_a_usable_belief(
    policy, configured, state, evidence
):
    found = revisit(configured, state, evidence, policy, NOW, lambda v: 0.5)
    if policy.adaptive:
        assert policy.min_interval_s <= found.interval_s <= policy.max_interval_s
    assert change_rate.is_belief(found.state["rate_belief"])


@given(policies(), seconds, histories, evidences, counts, counts, seconds)
def test_from_any_state_more_change_never_gives_a_longer_interval(
    policy, configured, history, evidence, more_new, more_changed, after_s
):
    state, then = replayed(configured, history, policy)
    now = then + timedelta(seconds=after_s)
    more = Evidence(evidence.new + more_new, evidence.changed + more_changed, evidence.unchanged)
    with_more = revisit(configured, state, more, policy, now, lambda v: 0.5)
    as_seen = revisit(configured, state, evidence, policy, now, lambda v: 0.5)
    assert with_more.interval_s <= as_seen.interval_s


@given(policies(), seconds, histories, seconds)
def test_from_any_state_a_change_never_gives_a_longer_interval_than_none(
    policy, configured, history, after_s
):
    state, then = replayed(configured, history, policy)
    now = then + timedelta(seconds=after_s)
    changed = revisit(configured, state, Evidence(changed=1), policy, now, lambda v: 0.5)
    unchanged = revisit(configured, state, Evidence(unchanged=1), policy, now, lambda v: 0.5)
    assert changed.interval_s <= unchanged.interval_s


@given(policies(adaptive=True), seconds, histories, st.booleans(), seconds)
def test_a_change_never_lengthens_the_interval_and_no_change_never_shortens_it(
    policy, configured, history, changed, after_s
):
    state, then = replayed(configured, history, policy)
    evidence = Evidence(changed=1) if changed else Evidence(unchanged=1)
    found = revisit(configured, state, evidence, policy, then + timedelta(seconds=after_s),
                    lambda v: 0.5)  # fmt: skip
    before = policy.clamp(state["interval_s"] if state else configured)
    if changed:
        assert found.interval_s <= before
    else:
        assert found.interval_s >= before


@given(policies(), seconds, histories, seconds)
def test_a_crawl_that_saw_no_item_changes_neither_interval_nor_belief(
    policy, configured, history, after_s
):
    state, then = replayed(configured, history, policy)
    found = revisit(configured, state, Evidence(), policy, then + timedelta(seconds=after_s),
                    lambda v: 0.5)  # fmt: skip
    if state is not None:
        current = state["interval_s"]
        assert found.interval_s == (policy.clamp(current) if policy.adaptive else configured)
        assert found.state["rate_belief"] == state["rate_belief"]


@given(policies(), seconds, histories)
def test_the_belief_stays_finite_normalised_and_its_estimate_positive(policy, configured, history):
    state, _ = replayed(configured, history, policy)
    if state is not None:
        belief = state["rate_belief"]
        assert change_rate.is_belief(belief) and max(belief) == 0
        assert all(math.isfinite(w) for w in belief)
        rate = change_rate.mean_rate(belief)
        assert math.isfinite(rate) and rate > 0


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
        if policy.method == STEPS:
            expected = next_interval(configured, expected, evidence, policy)
        elif visit > 1 and evidence.seen:  # the first crawl has nothing to compare with
            # the estimate, never longer after a change nor shorter after none
            estimate = estimated_interval(found.state["rate_belief"], policy)
            expected = same_direction(policy.clamp(expected or configured), estimate, evidence)
        else:
            expected = policy.clamp(expected or configured)
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
    adaptive=True,
    min_interval_s=HOUR,
    max_interval_s=30 * DAY,
    inc_rate=0.4,
    dec_rate=0.2,
    method=STEPS,
)
ESTIMATING = dataclasses.replace(ADAPTIVE, method=ESTIMATE, interval_per_mean=2.0, memory=1.0)


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
     ("max_interval_s", math.inf), ("method", "guess"), ("interval_per_mean", 0),
     ("interval_per_mean", math.nan), ("memory", 0), ("memory", 1.01)],
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


def test_estimate_learns_from_the_second_crawl_on_over_the_time_between_crawls():
    first = revisit(DAY, None, Evidence(new=3), ESTIMATING, NOW, lambda v: 0.5)
    assert first.interval_s == pytest.approx(DAY)  # all new, but nothing to compare with
    a_day_later = NOW + timedelta(days=1)
    same = revisit(DAY, first.state, Evidence(unchanged=3), ESTIMATING, a_day_later, lambda v: 0.5)
    edited = revisit(DAY, first.state, Evidence(changed=1), ESTIMATING, a_day_later, lambda v: 0.5)
    assert edited.interval_s < DAY < same.interval_s
    # a week without a change says more than a day without one
    a_week_later = NOW + timedelta(days=7)
    quiet = revisit(
        DAY, first.state, Evidence(unchanged=3), ESTIMATING, a_week_later, lambda v: 0.5
    )
    assert quiet.interval_s > same.interval_s


@pytest.mark.parametrize(
    "old",
    [
        # written by the `steps` rule: no belief, no updated_at
        {"interval_s": 2 * DAY, "visits": 7, "changes": 3,
         "last_items": {"new": 0, "changed": 1, "unchanged": 2}},
        {"interval_s": 2 * DAY, "visits": 7, "rate_belief": [0.0, 1.0], "updated_at": "Monday"},
        {"interval_s": 2 * DAY, "visits": 7, "rate_belief": [math.nan] * change_rate.GRID_SIZE},
        {"interval_s": 2 * DAY, "visits": 7, "rate_belief": [-1e4] * change_rate.GRID_SIZE},
        {"interval_s": 2 * DAY, "visits": 7, "rate_belief": "0" * change_rate.GRID_SIZE},
    ],
)  # fmt: skip
def test_an_older_or_malformed_state_starts_from_its_interval(old):
    # a belief is used only as the rule writes them (largest weight 0); else one is derived
    kept = revisit(DAY, old, Evidence(), ESTIMATING, NOW, lambda v: 0.5)
    assert kept.interval_s == 2 * DAY and kept.state["visits"] == 8
    assert change_rate.is_belief(kept.state["rate_belief"])
    longer = revisit(DAY, old, Evidence(unchanged=1), ESTIMATING, NOW, lambda v: 0.5)
    shorter = revisit(DAY, old, Evidence(changed=1), ESTIMATING, NOW, lambda v: 0.5)
    assert shorter.interval_s < 2 * DAY < longer.interval_s


# -- simulation ---------------------------------------------------------------------------------


def simulate(mean_change_s: float | None, weeks: int, seed: int, method: str) -> list[float]:
    """One page crawled under the adaptive rule for `weeks` of simulated time; it changes as a
    Poisson process with that mean time between changes (None: never). Returns the interval
    after each visit."""
    rng = random.Random(seed)
    policy = RecrawlPolicy(
        adaptive=True, min_interval_s=HOUR, max_interval_s=30 * DAY, jitter=0.1, method=method
    )
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


# where each method settles: `estimate` at interval_per_mean (2) times the mean time between
# changes; `steps` (+0.4 / -0.1) where a crawl sees a change with probability ~0.76, i.e.
# about 1.4 times the mean
SETTLES = {ESTIMATE: ((2 * HOUR, 6 * HOUR), (2 * DAY, 7 * DAY)),
           STEPS: ((HOUR, 4 * HOUR), (DAY, 5 * DAY))}  # fmt: skip


@pytest.mark.parametrize("method", [ESTIMATE, STEPS])
def test_simulated_pages_converge_to_the_pace_they_change_at(method):
    # Given pages that change about every 2 hours, every 2 days, and never, first crawled daily
    fast = [simulate(2 * HOUR, weeks=8, seed=s, method=method) for s in range(5)]
    slow = [simulate(2 * DAY, weeks=8, seed=s, method=method) for s in range(5)]
    static = simulate(None, weeks=26, seed=0, method=method)

    def settled(intervals: list[float]) -> float:
        tail = intervals[len(intervals) // 2 :]
        return sum(tail) / len(tail)

    (fast_low, fast_high), (slow_low, slow_high) = SETTLES[method]
    # Then the fast pages settle near their pace, far under the daily start...
    for intervals in fast:
        assert fast_low <= settled(intervals) <= fast_high
    # ... pages changing every 2 days settle at a few days ...
    for intervals in slow:
        assert slow_low <= settled(intervals) <= slow_high
    # ... and the static page grows, never shrinking, to the maximum
    assert all(b >= a for a, b in itertools.pairwise(static))
    assert static[-1] == 30 * DAY
