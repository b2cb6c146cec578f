"""Misfire and overlap policies: every due fire time is fired, missed or buffered, exactly once."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.schedules.interval import IntervalSchedule
from crawlsched.schedules.policies import (
    MAX_DUE_PER_DECISION,
    FirePlan,
    Misfire,
    MissedReason,
    Overlap,
    apply_misfire,
    apply_overlap,
    due_times,
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


SECOND = timedelta(seconds=1)
EVERY_SECOND = IntervalTrigger(IntervalSchedule(ANCHOR, 1.0))


def test_due_times_past_the_cap_without_a_grace_keeps_the_oldest_and_moves_on():
    now = ANCHOR + timedelta(hours=1)
    due, following, cut = due_times(EVERY_SECOND, ANCHOR, now)
    assert due == [ANCHOR + k * SECOND for k in range(MAX_DUE_PER_DECISION)]
    assert (following, cut) == (now + SECOND, True)


def test_due_times_at_the_cap_is_not_cut():
    # Exactly MAX_DUE_PER_DECISION due (the last one at now): all of them, nothing left out.
    now = ANCHOR + (MAX_DUE_PER_DECISION - 1) * SECOND
    due, following, cut = due_times(EVERY_SECOND, ANCHOR, now, timedelta(seconds=5))
    assert (len(due), due[-1], following, cut) == (MAX_DUE_PER_DECISION, now, now + SECOND, False)


def test_due_times_whose_timely_window_overlaps_the_oldest_lists_each_once():
    # 1,501 due, the last 2,000 s timely: the oldest 1,000, then the rest, none twice.
    now = ANCHOR + 1500 * SECOND
    due, following, cut = due_times(EVERY_SECOND, ANCHOR, now, timedelta(seconds=2000))
    assert due == [ANCHOR + k * SECOND for k in range(1501)]
    assert (following, cut) == (now + SECOND, True)


def test_due_times_caps_the_timely_window_too():
    # A grace of two hours on a 1 s schedule down for a day: the oldest 1,000 and the first
    # 1,000 of the timely window, which starts exactly `grace` before now.
    now = ANCHOR + timedelta(days=1)
    grace = timedelta(hours=2)
    due, following, cut = due_times(EVERY_SECOND, ANCHOR, now, grace)
    timely = [now - grace + k * SECOND for k in range(MAX_DUE_PER_DECISION)]
    assert due == [ANCHOR + k * SECOND for k in range(MAX_DUE_PER_DECISION)] + timely
    assert (following, cut) == (now + SECOND, True)


@pytest.mark.parametrize(
    ("age", "late"),
    [(timedelta(seconds=10), False), (timedelta(seconds=10, microseconds=1), True)],
)
def test_a_time_exactly_grace_old_is_timely(age, late):
    now = ANCHOR + timedelta(hours=1)
    fire, missed = apply_misfire([now - age], now, timedelta(seconds=10), Misfire.SKIP, 0)
    assert (fire, missed) == (([], [now - age]) if late else ([now - age], []))


@pytest.mark.parametrize(
    ("policy", "limit", "fired"),
    [
        (Misfire.SKIP, 5, [4]),
        (Misfire.RUN_ONCE, 5, [4]),  # something timely: no late one is added
        (Misfire.CATCH_UP, 0, [4]),
        (Misfire.CATCH_UP, 1, [3, 4]),
        (Misfire.CATCH_UP, 2, [2, 3, 4]),
        (Misfire.CATCH_UP, 9, [0, 1, 2, 3, 4]),
    ],
)
def test_apply_misfire_table(policy, limit, fired):
    # Hourly times 0..4 h, now at 4 h: 0-3 late, 4 timely.
    times = [ANCHOR + timedelta(hours=h) for h in range(5)]
    fire, missed = apply_misfire(times, times[-1], timedelta(minutes=1), policy, limit)
    assert fire == [times[h] for h in fired]
    assert missed == [t for t in times if t not in fire]


def test_run_once_fires_the_latest_late_time_when_nothing_is_timely():
    times = [ANCHOR + timedelta(hours=h) for h in range(4)]
    now = times[-1] + timedelta(hours=1)
    fire, missed = apply_misfire(times, now, timedelta(minutes=1), Misfire.RUN_ONCE, 0)
    assert (fire, missed) == (times[-1:], times[:-1])
    assert apply_misfire([], now, timedelta(minutes=1), Misfire.RUN_ONCE, 0) == ([], [])


@pytest.mark.parametrize("running", [False, True])
@pytest.mark.parametrize("policy", list(Overlap))
def test_apply_overlap_of_nothing_due_and_nothing_buffered_is_nothing(policy, running):
    assert apply_overlap([], policy, running, None) == ([], [], None)


def test_plan_fires_reports_missed_times_with_their_reason_in_time_order():
    # Hourly, down five hours, the previous run still going: 0-3 h late (no clock), 4 h
    # timely but overlapping (skip), 5 h not due yet.
    times = [ANCHOR + timedelta(hours=h) for h in range(5)]
    trigger = IntervalTrigger(IntervalSchedule(ANCHOR, 3600.0))
    plan = plan_fires(
        trigger,
        ANCHOR,
        times[-1],
        grace=timedelta(minutes=1),
        misfire=Misfire.SKIP,
        catch_up_limit=0,
        overlap=Overlap.SKIP,
        previous_running=True,
    )
    assert plan == FirePlan(
        fire=[],
        missed=[(t, MissedReason.NO_CLOCK) for t in times[:-1]]
        + [(times[-1], MissedReason.OVERLAP)],
        truncated=False,
        next_fire_at=times[-1] + timedelta(hours=1),
        buffered=None,
    )
    assert [r.value for r in MissedReason] == ["no_clock", "overlap", "paused", "starved"]
    assert FirePlan() == FirePlan([], [], False, None, None)


def test_plan_fires_catches_up_the_latest_late_times_it_is_allowed():
    # Hourly, down five hours, catch-up limit 2: 2 h and 3 h fire late with 4 h; 0-1 h missed.
    times = [ANCHOR + timedelta(hours=h) for h in range(5)]
    plan = plan_fires(
        IntervalTrigger(IntervalSchedule(ANCHOR, 3600.0)),
        ANCHOR,
        times[-1],
        grace=timedelta(minutes=1),
        misfire=Misfire.CATCH_UP,
        catch_up_limit=2,
        overlap=Overlap.ALLOW,
        previous_running=False,
    )
    assert plan.fire == times[2:]
    assert plan.missed == [(t, MissedReason.NO_CLOCK) for t in times[:2]]


H = [ANCHOR + timedelta(hours=h) for h in range(4)]


@pytest.mark.parametrize(
    ("fire", "policy", "running", "buffered", "expected"),
    [
        # The previous run ended: the oldest starts; skip misses the rest, buffer_one keeps the
        # latest for later and misses those between.
        (H[:3], Overlap.SKIP, False, None, ([H[0]], H[1:3], None)),
        (H[:4], Overlap.BUFFER_ONE, False, None, ([H[0]], H[1:3], H[3])),
        (H[:1], Overlap.BUFFER_ONE, False, None, ([H[0]], [], None)),
        # Still running: nothing starts; skip misses all, buffer_one keeps only the latest.
        (H[:3], Overlap.SKIP, True, None, ([], H[:3], None)),
        (H[1:4], Overlap.BUFFER_ONE, True, H[0], ([], H[:3], H[3])),
        (H[:1], Overlap.BUFFER_ONE, True, None, ([], [], H[0])),
        (H[:3], Overlap.ALLOW, True, None, (H[:3], [], None)),
    ],
)
def test_apply_overlap_table(fire, policy, running, buffered, expected):
    assert apply_overlap(fire, policy, running, buffered) == expected


def test_due_times_past_the_cap_leaves_a_time_just_older_than_grace_out():
    # The timely window is [now - grace, now]: the fire time 1 µs before it is late and, past
    # the cap, not listed; the ten after it are.
    now = ANCHOR + 2000 * SECOND + timedelta(microseconds=1)
    due, _, cut = due_times(EVERY_SECOND, ANCHOR, now, timedelta(seconds=10))
    assert due[MAX_DUE_PER_DECISION:] == [ANCHOR + k * SECOND for k in range(1991, 2001)]
    assert cut
