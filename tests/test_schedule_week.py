"""A simulated clock drives a week of schedules with downtime: every fire time is planned once
or recorded missed with the right reason, per policy."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from crawlsched.flow import schedule_ops
from crawlsched.flow.ticking import fire_due
from crawlsched.planning.run_names import FINISHED, run_id_for
from crawlsched.runtime import Runtime
from crawlsched.schedules.triggers import trigger_of
from crawlsched.settings import Settings

START = datetime(2026, 3, 23, tzinfo=UTC)  # the week of the 2026 spring change in Europe
END = START + timedelta(days=7)
TICK = timedelta(minutes=2)
GRACE = timedelta(minutes=6)  # three clock intervals
# No clock at all during these (start, end): fire times inside are seen late.
DOWNTIME = [
    (START + timedelta(days=1, hours=3), START + timedelta(days=1, hours=9)),
    (START + timedelta(days=3, hours=22), START + timedelta(days=4, hours=1, minutes=30)),
    (START + timedelta(days=5, hours=12), START + timedelta(days=5, hours=12, minutes=40)),
]
PAUSE = (START + timedelta(days=6), START + timedelta(days=6, hours=8))
RUN_LASTS = timedelta(minutes=50)  # how long each run of the overlap schedules keeps going

SCHEDULES = {
    "hourly-skip": {"interval_s": 3600, "misfire": "skip"},
    "paris-quarter-once": {
        "cron": "*/15 * * * *",
        "timezone": "Europe/Paris",
        "misfire": "run_once",
    },
    "ny-morning-catchup": {
        "cron": "0 2-8 * * *",
        "timezone": "America/New_York",
        "misfire": "catch_up",
        "catch_up_limit": 2,
    },
    "kolkata-overlap-skip": {
        "cron": "0,20,40 * * * *",
        "timezone": "Asia/Kolkata",
        "overlap": "skip",
        "misfire": "skip",
    },
    "overlap-buffer": {"interval_s": 1800, "overlap": "buffer_one", "misfire": "skip"},
    "paused-daily": {"cron": "0 * * * *", "misfire": "skip"},
    "once-in-downtime": {"at": START + timedelta(days=1, hours=4), "misfire": "run_once"},
}
OVERLAPPING = {"kolkata-overlap-skip", "overlap-buffer"}


class SimClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def down(moment: datetime) -> bool:
    return any(a <= moment < b for a, b in DOWNTIME)


@pytest.fixture
def week(embedded_mongo_url):
    clock = SimClock(START)
    settings = Settings(mongo_url=embedded_mongo_url, clock_interval_s=TICK.total_seconds())
    rt = Runtime(settings, clock=clock)
    rt.create_indexes()
    for schedule_id, given in SCHEDULES.items():
        schedule_ops.create(rt, schedule_id, {"collections": ["websites"], **given})
    planned: list[tuple[str, datetime]] = []
    conflicts: list[tuple[str, datetime]] = []

    def send_plan(schedule_id: str, fire_at: datetime) -> None:
        if schedule_id in OVERLAPPING and rt.schedules.previous_running(schedule_id):
            conflicts.append((schedule_id, fire_at))
        # What the planner does first: open the run (it stays open while "crawling")
        planned.append((schedule_id, fire_at))
        rt.runs.open(run_id_for(schedule_id, fire_at), schedule_id, fire_at, clock.now)
        rt.db.runs.update_one(
            {"_id": run_id_for(schedule_id, fire_at)}, {"$set": {"state": "running"}}
        )

    # Drive the week: a tick every two minutes except in downtime
    while clock.now <= END:
        if clock.now == PAUSE[0]:
            schedule_ops.pause(rt, "paused-daily")
        if clock.now == PAUSE[1]:
            schedule_ops.unpause(rt, "paused-daily")
        # Runs end RUN_LASTS after they started (the crawl finishing)
        rt.db.runs.update_many(
            {"created_at": {"$lte": clock.now - RUN_LASTS}, "state": "running"},
            {"$set": {"state": FINISHED}},
        )
        if not down(clock.now):
            fire_due(rt, send_plan)
        clock.now += TICK
    return rt, planned, conflicts


def test_a_week_every_fire_time_is_planned_once_or_missed_with_its_reason(week):
    rt, planned, _ = week
    assert len(planned) == len(set(planned)), "a fire time was planned twice"
    missed = list(rt.db.missed_runs.find({}))
    seen_missed = Counter((m["schedule_id"], m["fire_at"]) for m in missed)
    assert max(seen_missed.values()) == 1, "a fire time was recorded missed twice"
    for schedule_id, given in SCHEDULES.items():
        doc = rt.schedules.get(schedule_id)
        trigger = trigger_of(doc)
        created = START
        expected = list(trigger.times_between(created, END - GRACE))
        mine_planned = sorted(t for s, t in planned if s == schedule_id)
        mine_missed = {m["fire_at"]: m["reason"] for m in missed if m["schedule_id"] == schedule_id}
        # Every fire time of the week is planned, missed or held back: once, never twice
        held = [doc["buffered_fire_at"]] if doc.get("buffered_fire_at") else []
        assert not set(mine_planned) & set(mine_missed), schedule_id
        accounted = {*mine_planned, *mine_missed, *held}
        assert set(expected) <= accounted, schedule_id
        assert accounted <= set(trigger.times_between(created - timedelta(seconds=1), END))
        # Reasons per policy
        for fire_at, reason in mine_missed.items():
            if reason == "no_clock":
                # it fell in a downtime, or so late that the first tick after it was past grace
                assert any(a - GRACE <= fire_at < b for a, b in DOWNTIME), (schedule_id, fire_at)
            elif reason == "paused":
                assert schedule_id == "paused-daily"
                assert PAUSE[0] <= fire_at < PAUSE[1]
            elif reason == "overlap":
                assert schedule_id in OVERLAPPING
            else:
                pytest.fail(f"unexpected reason {reason}")
        reasons = Counter(mine_missed.values())
        if given.get("misfire") == "skip" and schedule_id not in OVERLAPPING:
            # every fire time inside a downtime (and not in its last grace) is missed
            in_downtime = [t for t in expected if any(a <= t < b - GRACE for a, b in DOWNTIME)]
            assert in_downtime and all(mine_missed.get(t) == "no_clock" for t in in_downtime)
        if schedule_id == "paris-quarter-once":
            # per downtime: the latest late time fires once, unless a timely one was due at the
            # first tick after it; the rest are missed
            for a, b in DOWNTIME:
                late_fired = [t for t in mine_planned if a <= t < b - GRACE]
                timely = [t for t in expected if b - GRACE <= t <= b]
                late = [t for t in expected if a <= t < b - GRACE]
                assert late_fired == ([] if timely else late[-1:]), (a, b)
        if schedule_id == "ny-morning-catchup":
            late_fired = [t for t in mine_planned if any(a <= t < b - GRACE for a, b in DOWNTIME)]
            assert 0 < len(late_fired) <= 2 * len(DOWNTIME)
            assert reasons["no_clock"] > 0
        if schedule_id in OVERLAPPING:
            # runs last 50 minutes: a 30-minute schedule overlaps every other time
            assert reasons["overlap"] > 0
        if schedule_id == "paused-daily":
            assert reasons["paused"] == 8
        if schedule_id == "once-in-downtime":
            assert mine_planned == [given["at"]] and not mine_missed
            assert doc["state"] == "done"


def test_no_run_of_an_overlap_schedule_starts_while_its_previous_run_runs(week):
    _, planned, conflicts = week
    assert conflicts == []
    assert sum(1 for s, _ in planned if s in OVERLAPPING) > 100  # they did fire, a lot
