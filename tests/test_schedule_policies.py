"""Misfire and overlap policies: every due fire time is fired, missed or buffered, exactly once."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.schedules.interval import IntervalSchedule
from crawlsched.schedules.policies import (
    MAX_DUE_PER_DECISION,
    Misfire,
    MissedReason,
    Overlap,
    apply_overlap,
    plan_fires,
)
from crawlsched.schedules.triggers import CronTrigger, IntervalTrigger

ANCHOR = datetime(2026, 3, 1, tzinfo=UTC)

triggers = st.one_of(
    st.integers(1, 7200).map(lambda s: IntervalTrigger(IntervalSchedule(ANCHOR, float(s)))),
    st.sampled_from(["*/5 * * * *", "0 * * * *", "30 2 * * *", "*/15 1-3 * * *"]).flatmap(
        lambda e: st.sampled_from(["Europe/Paris", "America/New_York", "Asia/Kolkata"]).map(
            lambda z: CronTrigger(e, z)
        )
    ),
)


@st.composite
def situations(draw):
    trigger = draw(triggers)
    first = trigger.next_after(ANCHOR + timedelta(minutes=draw(st.integers(0, 60 * 24 * 60))))
    now = first + timedelta(seconds=draw(st.integers(0, 3 * 86400)))
    grace = timedelta(seconds=draw(st.integers(1, 3600)))
    buffered = draw(st.none() | st.just(first - timedelta(minutes=1)))
    return trigger, first, now, grace, buffered


@settings(max_examples=300)
@given(
    situations(),
    st.sampled_from(Misfire),
    st.integers(0, 20),
    st.sampled_from(Overlap),
    st.booleans(),
)
def test_every_due_time_is_fired_missed_or_buffered_once(
    situation, misfire, limit, overlap, running
):
    trigger, first, now, grace, buffered = situation
    plan = plan_fires(
        trigger,
        first,
        now,
        grace=grace,
        misfire=misfire,
        catch_up_limit=limit,
        overlap=overlap,
        previous_running=running,
        buffered=buffered,
    )
    due = list(trigger.times_between(first - timedelta(microseconds=1), now))
    accounted = [*plan.fire, *(t for t, _ in plan.missed)]
    if plan.buffered is not None:
        accounted.append(plan.buffered)
    # Each due time (and the old buffered one) exactly once, unless the decision was capped
    considered = (
        due[:MAX_DUE_PER_DECISION]
        + [t for t in due[MAX_DUE_PER_DECISION:] if now - t <= grace][:MAX_DUE_PER_DECISION]
    )
    expected = sorted([*considered, *([buffered] if buffered else [])])
    assert sorted(accounted) == expected
    assert plan.truncated == (len(due) > MAX_DUE_PER_DECISION)
    # The next fire time is the trigger's first after now
    assert plan.next_fire_at == trigger.next_after(now)
    late = [t for t in considered if now - t > grace]
    timely = [t for t in considered if now - t <= grace]
    no_clock = sorted(t for t, why in plan.missed if why == MissedReason.NO_CLOCK)
    # What the misfire policy let through, before the overlap policy
    survivors = sorted(set(accounted) - set(no_clock))
    fired_late = sorted(t for t in survivors if t in late)
    assert set(timely) <= set(survivors)
    if misfire == Misfire.SKIP:
        assert fired_late == []
    elif misfire == Misfire.RUN_ONCE:
        assert fired_late == (late[-1:] if not timely else [])
    else:
        assert fired_late == (late[len(late) - limit :] if limit else [])
    assert no_clock == sorted(set(late) - set(fired_late))
    overlapped = sorted(t for t, why in plan.missed if why == MissedReason.OVERLAP)
    if overlap == Overlap.ALLOW:
        assert (plan.fire, overlapped, plan.buffered) == (survivors, [], None)
    elif not running:
        # One run at a time: the oldest starts
        assert plan.fire == survivors[:1]
        if overlap == Overlap.SKIP:
            assert (overlapped, plan.buffered) == (survivors[1:], None)
        else:
            assert overlapped == survivors[1:-1]
            assert plan.buffered == (survivors[-1] if len(survivors) > 1 else None)
    else:
        # The previous run still runs: nothing starts
        assert plan.fire == []
        if overlap == Overlap.SKIP:
            assert (overlapped, plan.buffered) == (survivors, None)
        else:
            assert overlapped == survivors[:-1]
            assert plan.buffered == (survivors[-1] if survivors else None)


def test_buffered_time_starts_first_once_the_previous_run_ended_and_the_new_one_waits():
    held = ANCHOR
    fire, missed, buffered = apply_overlap(
        [ANCHOR + timedelta(hours=1)], Overlap.BUFFER_ONE, False, held
    )
    assert (fire, missed, buffered) == ([held], [], ANCHOR + timedelta(hours=1))


def test_buffer_one_keeps_only_the_latest_and_misses_what_it_displaces():
    times = [ANCHOR + timedelta(hours=h) for h in range(3)]
    fire, missed, buffered = apply_overlap(times[1:], Overlap.BUFFER_ONE, True, times[0])
    assert (fire, missed, buffered) == ([], times[:2], times[2])


@pytest.mark.parametrize("policy", list(Misfire))
def test_a_clock_down_for_a_week_on_a_1s_schedule_is_capped(policy):
    trigger = IntervalTrigger(IntervalSchedule(ANCHOR, 1.0))
    now = ANCHOR + timedelta(days=7)
    plan = plan_fires(
        trigger,
        ANCHOR,
        now,
        grace=timedelta(seconds=15),
        misfire=policy,
        catch_up_limit=5,
        overlap=Overlap.ALLOW,
        previous_running=False,
    )
    assert plan.truncated
    # The oldest MAX_DUE_PER_DECISION and the timely window [now - 15 s, now] are decided
    assert len(plan.fire) + len(plan.missed) == MAX_DUE_PER_DECISION + 16
    assert now in plan.fire
    assert plan.next_fire_at == now + timedelta(seconds=1)
