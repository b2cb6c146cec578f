"""When a schedule fires: interval, cron in an IANA time zone, or once. Pure; `now` passed in.

Cron maths is cronsim's (never hand-written). Its rule at daylight-saving changes is Debian
cron's, and it is ours:

- A job at a fixed wall-clock time (minute and hour fields both not starting with `*`, e.g.
  `30 2 * * *`) fires once per matching local time. In the hour the clocks repeat it fires on
  the first pass only; in the hour they skip it fires at the first valid minute after the gap
  (02:30 on the spring-forward night of Europe/Paris fires at 03:00). Never doubled, never lost.
- A job with a wildcard minute or hour (`*/15 * * * *`) follows elapsed time: it fires every 15
  real minutes, through both passes of a repeated hour, and not in a skipped one.

croniter fires a fixed-time job twice in a repeated hour (02:30+02:00 and 02:30+01:00). The
other difference: when day-of-month and day-of-week are both restricted, a job fires on either,
unless one of them starts with `*` (`*/2`): then both must match (Vixie cron; croniter ORs).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from crawlsched.schedules.interval import IntervalSchedule


class Trigger(Protocol):
    def next_after(self, moment: datetime) -> datetime | None:
        """The first fire time strictly after `moment`; None when it never fires again."""

    def times_between(self, start: datetime, end: datetime) -> Iterator[datetime]:
        """Fire times t with start < t <= end, in order."""


def _aware(value: datetime, name: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got {value!r}")
    return value


def zone_named(name: str) -> ZoneInfo:
    """An IANA zone, or ValueError naming the field."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ValueError(f"timezone: unknown IANA time zone {name!r}") from None


@dataclass(frozen=True)
class CronTrigger:
    expression: str
    timezone: str = "UTC"
    zone: ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "zone", zone_named(self.timezone))
        fields = self.expression.split() if isinstance(self.expression, str) else []
        if len(fields) != 5:
            raise ValueError(
                f"cron: expected 5 fields (minute hour day month weekday), got {self.expression!r}"
            )
        try:
            CronSim(self.expression, datetime(2000, 1, 1, tzinfo=self.zone))
        except CronSimError as e:
            raise ValueError(f"cron: invalid expression {self.expression!r}: {e}") from None

    def _iter(self, moment: datetime) -> Iterator[datetime]:
        """Fire times after `moment`, in UTC. Compared in UTC on purpose: Python compares two
        datetimes of the same zone by wall clock, ignoring `fold`, which would drop the second
        pass of a repeated hour."""
        after = _aware(moment, "moment").astimezone(UTC)
        # cronsim counts in whole seconds; start from the second so nothing is skipped.
        it = CronSim(self.expression, after.astimezone(self.zone).replace(microsecond=0))
        for fire in it:
            fire_utc = fire.astimezone(UTC)
            if fire_utc > after:
                yield fire_utc

    def next_after(self, moment: datetime) -> datetime | None:
        return next(self._iter(moment), None)

    def times_between(self, start: datetime, end: datetime) -> Iterator[datetime]:
        for fire in self._iter(start):
            if fire > end:
                return
            yield fire


@dataclass(frozen=True)
class OnceTrigger:
    at: datetime

    def __post_init__(self) -> None:
        _aware(self.at, "at")

    def next_after(self, moment: datetime) -> datetime | None:
        return self.at if moment < self.at else None

    def times_between(self, start: datetime, end: datetime) -> Iterator[datetime]:
        if start < self.at <= end:
            yield self.at


@dataclass(frozen=True)
class IntervalTrigger:
    schedule: IntervalSchedule

    def next_after(self, moment: datetime) -> datetime:
        return self.schedule.next_after(moment)

    def times_between(self, start: datetime, end: datetime) -> Iterator[datetime]:
        fire = self.schedule.next_after(start)
        while fire <= end:
            yield fire
            fire = self.schedule.next_after(fire)


def trigger_of(doc: dict[str, Any]) -> Trigger:
    """The trigger a schedule document describes. Documents without `trigger` are the interval
    sweeps of earlier versions (interval_s + anchor), read as they are."""
    kind = doc.get("trigger", "interval")
    if kind == "interval":
        return IntervalTrigger(IntervalSchedule(_utc(doc["anchor"]), float(doc["interval_s"])))
    if kind == "cron":
        return CronTrigger(doc["cron"], doc.get("timezone") or "UTC")
    if kind == "once":
        return OnceTrigger(_utc(doc["at"]))
    raise ValueError(f"trigger: unknown kind {kind!r} (interval, cron or once)")


def _utc(value: datetime) -> datetime:
    """MongoDB hands datetimes back naive (in UTC) unless the client is tz-aware."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def upcoming(trigger: Trigger, now: datetime, horizon: timedelta, limit: int) -> list[datetime]:
    """Fire times in (now, now + horizon], at most `limit` of them."""
    times: list[datetime] = []
    for fire in trigger.times_between(now, now + horizon):
        if len(times) >= limit:
            break
        times.append(fire)
    return times
