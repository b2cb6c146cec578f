"""The KEDA + HPA model behind bench_scaling.py: bounds, activation, cooldown, stabilization."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks import _keda_model as keda

DT = 5.0

rules = st.builds(
    keda.KedaRule,
    value=st.sampled_from([1.0, 5.0, 20.0, 100.0]),
    activation_value=st.sampled_from([0.0, 1.0, 10.0]),
    polling_interval_s=st.sampled_from([5.0, 15.0, 30.0]),
    cooldown_period_s=st.sampled_from([0.0, 60.0, 300.0, 900.0]),
    min_replicas=st.integers(0, 3),
    max_replicas=st.integers(3, 12),
    scale_down_window_s=st.sampled_from([0.0, 60.0, 300.0]),
)
# Queue lengths over time: runs of one value, so that quiet spells and bursts both occur.
metrics = st.lists(
    st.tuples(st.integers(1, 120), st.sampled_from([0, 0, 1, 3, 10, 40, 150, 2000])),
    min_size=1,
    max_size=12,
).map(lambda runs: [float(m) for steps, m in runs for _ in range(steps)])


def replay(rule: keda.KedaRule, series: list[float]):
    """[(now, metric, replicas before, replicas after, report)] for each step."""
    state = keda.initial_state(rule)
    trace = []
    for i, metric in enumerate(series):
        now = i * DT
        before = state.replicas
        state, report = keda.step(state, now, metric, rule)
        trace.append((now, metric, before, state.replicas, report))
    return trace


@given(rules, metrics)
def test_keda_replicas_stay_within_bounds(rule, series):
    for _, _, _, after, _ in replay(rule, series):
        assert after <= rule.max_replicas
        assert after == 0 or after >= rule.hpa_min
        if rule.min_replicas > 0:
            assert after >= rule.min_replicas


@given(rules, metrics)
def test_keda_scales_to_zero_only_after_a_quiet_cooldown(rule, series):
    last_active = None
    for now, metric, before, after, report in replay(rule, series):
        if report.polled and metric > rule.activation_value:
            last_active = now
        if before > 0 and after == 0:
            # Then: min 0, a poll just saw the queue at or below activation, and no poll saw
            # it active within the cooldown period.
            assert rule.min_replicas == 0
            assert report.polled and metric <= rule.activation_value
            assert last_active is None or now - last_active >= rule.cooldown_period_s


@given(rules, metrics)
def test_keda_wakes_from_zero_only_at_a_poll_that_sees_work(rule, series):
    for _, metric, before, after, report in replay(rule, series):
        if before == 0 and after > 0:
            assert report.polled and metric > rule.activation_value
            assert after == rule.hpa_min


@given(
    rules,
    st.integers(1, 50),
    st.floats(0, 10_000, allow_nan=False),
    st.floats(0, 10_000, allow_nan=False),
)
def test_keda_desired_replicas_is_monotone_in_queue_length(rule, current, a, b):
    low, high = sorted((a, b))
    assert keda.desired_replicas(low, current, rule) <= keda.desired_replicas(high, current, rule)


@given(rules, st.integers(1, 50), st.floats(0, 10_000, allow_nan=False))
def test_keda_desired_replicas_is_current_within_tolerance_else_ceil(rule, current, metric):
    got = keda.desired_replicas(metric, current, rule)
    if abs(metric / (rule.value * current) - 1) <= rule.tolerance:
        assert got == current
    else:
        assert got == math.ceil(metric / rule.value)


@given(rules, metrics)
def test_keda_never_scales_down_below_a_recommendation_of_the_window(rule, series):
    # A sync at time s recommended r with n replicas after it: until s + window, the HPA keeps
    # at least min(n, r) (KEDA's scale to zero aside).
    floors: list[tuple[float, int]] = []
    for now, _, before, after, report in replay(rule, series):
        if after == 0:
            floors.clear()  # KEDA took the target to zero: the HPA's window starts afresh
            continue
        if report.synced and after < before:
            live = [f for t, f in floors if t > now - rule.scale_down_window_s]
            assert all(after >= f for f in live)
        if report.synced:
            floors.append((now, min(after, max(report.recommendation, rule.hpa_min))))


@given(rules, metrics)
def test_keda_scale_up_at_most_doubles_or_adds_four_per_period(rule, series):
    trace = replay(rule, series)
    for now, _, _, after, _ in trace:
        earlier = [a for t, _, _, a, _ in trace if now - rule.scale_up_period_s <= t < now]
        if earlier and min(earlier) > 0:
            base = min(earlier)
            assert after <= max(2 * base, base + 4, rule.hpa_min)


def test_keda_a_burst_wakes_a_scaled_to_zero_target_and_it_cools_down():
    # Given a target at zero, polls every 15 s, cooldown 60 s, value 10
    rule = keda.KedaRule(
        value=10, activation_value=1, polling_interval_s=15, cooldown_period_s=60,
        min_replicas=0, max_replicas=10, scale_down_window_s=30,
    )  # fmt: skip
    # When 100 messages wait for 60 s, then the queue is empty
    series = [100.0] * 12 + [0.0] * 40
    trace = replay(rule, series)
    replicas = [after for *_, after, _ in trace]
    # Then it wakes at the first poll, grows to ceil(100 / 10) = 10 within the rate limits,
    assert replicas[0] == 1
    assert max(replicas) == 10
    assert replicas[int(30 / DT)] == 10  # 1 -> 5 (+4) at 15 s, 5 -> 10 (double) at 30 s
    # and is at zero 60 s after the last poll that saw work (t = 45 s), at the poll of 105 s
    assert replicas[int(105 / DT)] == 0
    assert replicas[int(105 / DT) - 1] > 0


def test_keda_tolerance_holds_the_count_near_the_target():
    rule = keda.KedaRule(value=20, min_replicas=1, max_replicas=10)
    assert keda.desired_replicas(105, 5, rule) == 5  # 105 / 100: within 10 %
    assert keda.desired_replicas(111, 5, rule) == 6
    assert keda.desired_replicas(89, 5, rule) == 5  # ceil(4.45)


@pytest.mark.parametrize(
    "field, value",
    [("value", 0), ("polling_interval_s", 0), ("cooldown_period_s", -1), ("max_replicas", 0)],
)
def test_keda_rule_rejects_bad_fields_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        keda.KedaRule(**{field: value})
