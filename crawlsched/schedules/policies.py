"""Misfire and overlap policies (after Temporal schedules): which due fire times are planned,
which are recorded missed and why. Pure: the ticker passes in the trigger, the times and whether
the schedule's previous run is still going.

Misfire (fire times the ticker saw late, i.e. more than `grace` after they were due, because no
clock was running):
- skip: late times are missed ("no_clock"); only timely ones fire.
- run_once: as skip, but if nothing timely is due, the latest late time fires (APScheduler's
  coalesce).
- catch_up: the latest `catch_up_limit` late times fire as well; older ones are missed.

Overlap (the previous run of the schedule has not finished):
- allow: fire anyway.
- skip: every fire time is missed ("overlap").
- buffer_one: the latest fire time is kept and fires as soon as the run ends; any time it
  displaces, and the others, are missed ("overlap").
With skip or buffer_one, several times due at once (after downtime) start one run: the first;
the others count as overlapping it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from crawlsched.schedules.triggers import Trigger

# Fire times enumerated per decision at most: a clock down for weeks on a 1 s schedule must not
# make one tick build millions of rows. Beyond it, the rest count as missed without a row each.
MAX_DUE_PER_DECISION = 1000


class Misfire(StrEnum):
    SKIP = "skip"
    RUN_ONCE = "run_once"
    CATCH_UP = "catch_up"


class Overlap(StrEnum):
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    ALLOW = "allow"


class MissedReason(StrEnum):
    NO_CLOCK = "no_clock"  # nobody ticked while it was due
    OVERLAP = "overlap"  # skipped: the previous run still ran
    PAUSED = "paused"
    STARVED = "starved"  # planned, but batches waited past their bound for a resource


@dataclass(frozen=True)
class FirePlan:
    fire: list[datetime] = field(default_factory=list)
    missed: list[tuple[datetime, MissedReason]] = field(default_factory=list)
    truncated: bool = False  # more than MAX_DUE_PER_DECISION were due: some have no row
    next_fire_at: datetime | None = None
    buffered: datetime | None = None


def due_times(
    trigger: Trigger, next_fire_at: datetime, now: datetime, grace: timedelta | None = None
) -> tuple[list[datetime], datetime | None, bool]:
    """Fire times from `next_fire_at` up to `now`, the next one after them, and whether some
    were left out. Past MAX_DUE_PER_DECISION the walk jumps to the timely window (the last
    `grace` before now; none without a grace), so the recent times are never the ones lost."""
    due: list[datetime] = []
    fire: datetime | None = next_fire_at
    while fire is not None and fire <= now:
        if len(due) >= MAX_DUE_PER_DECISION:
            if grace is None:
                return due, trigger.next_after(now), True
            timely_from = max(due[-1], now - grace - timedelta(microseconds=1))
            fire = trigger.next_after(timely_from)
            timely: list[datetime] = []
            while fire is not None and fire <= now and len(timely) < MAX_DUE_PER_DECISION:
                timely.append(fire)
                fire = trigger.next_after(fire)
            return due + timely, trigger.next_after(now), True
        due.append(fire)
        fire = trigger.next_after(fire)
    return due, fire, False


def apply_misfire(
    due: list[datetime], now: datetime, grace: timedelta, policy: Misfire, catch_up_limit: int
) -> tuple[list[datetime], list[datetime]]:
    """Split due times (in order) into (fire, missed for no clock)."""
    late = [t for t in due if now - t > grace]
    timely = [t for t in due if now - t <= grace]
    if policy == Misfire.CATCH_UP:
        keep = late[len(late) - catch_up_limit :] if catch_up_limit > 0 else []
    elif policy == Misfire.RUN_ONCE and late and not timely:
        keep = late[-1:]
    else:
        keep = []
    kept = set(keep)
    return [*keep, *timely], [t for t in late if t not in kept]


def apply_overlap(
    fire: list[datetime],
    policy: Overlap,
    previous_running: bool,
    buffered: datetime | None,
) -> tuple[list[datetime], list[datetime], datetime | None]:
    """(fire now, missed for overlap, new buffered time)."""
    # A buffered time is older than anything due now, so it goes first.
    candidates = ([buffered] if buffered else []) + fire
    if policy == Overlap.ALLOW:
        return candidates, [], None
    if not previous_running:
        # One run at a time: the first starts; the rest would overlap it.
        first, rest = candidates[:1], candidates[1:]
        if policy == Overlap.SKIP or not rest:
            return first, rest, None
        return first, rest[:-1], rest[-1]
    if policy == Overlap.SKIP:
        return [], candidates, None
    if not candidates:
        return [], [], None
    return [], candidates[:-1], candidates[-1]


def plan_fires(
    trigger: Trigger,
    next_fire_at: datetime,
    now: datetime,
    *,
    grace: timedelta,
    misfire: Misfire,
    catch_up_limit: int,
    overlap: Overlap,
    previous_running: bool,
    buffered: datetime | None = None,
) -> FirePlan:
    """Everything the ticker does for one due schedule, decided in one place."""
    due, following, cut = due_times(trigger, next_fire_at, now, grace)
    fire, no_clock = apply_misfire(due, now, grace, misfire, catch_up_limit)
    fire, overlapped, new_buffer = apply_overlap(fire, overlap, previous_running, buffered)
    missed = [(t, MissedReason.NO_CLOCK) for t in no_clock]
    missed += [(t, MissedReason.OVERLAP) for t in overlapped]
    return FirePlan(sorted(fire), sorted(missed), cut, following, new_buffer)
