"""Upcoming runs of N cron schedules over three days: ours vs croniter, same run, same list.

N schedules (default 10,000) with cron expressions drawn (fixed seed) from what operators write
(quarter hours, working hours, weekdays, a few odd minutes) in five IANA zones. Both sides list
every fire time in (start, start + 3 days], in UTC, per schedule:

  ours      crawlsched.schedules.upcoming.upcoming_by_schedule (cronsim; schedules with the
            same cron and zone share one computation, as `crawlsched schedules next` does)
  croniter  croniter(expression, start in the zone).get_next(datetime) until past the horizon,
            for each schedule

  speedup_vs_croniter  croniter's time / ours                      (target >= 3)
  speedup_uncached     croniter's time / ours with every schedule computed on its own
  identical            the two lists are equal for every schedule

The window starts on 2026-06-15, three days with no DST change in any of the zones. Across a
change the lists differ on purpose (croniter fires a fixed-time job twice in the repeated hour;
see crawlsched/schedules/triggers.py): `dst_window_differing` counts the schedules whose lists
differ over the three days around 2026-10-25, as information.

    .venv/bin/python benchmarks/bench_upcoming.py [--schedules 10000] [--days 3]

Last line: JSON with speedup_vs_croniter and identical.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from croniter import croniter  # noqa: E402

from crawlsched.schedules.upcoming import upcoming_by_schedule  # noqa: E402

ZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Australia/Sydney"]
START = datetime(2026, 6, 15, tzinfo=UTC)
DST_START = datetime(2026, 10, 23, 12, tzinfo=UTC)


def expressions(n: int, seed: int = 8) -> list[dict]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        minute = rng.choice(["0", "15", "30", "45", "*/5", "*/10", "*/15", "*/30", "0,30",
                             str(rng.randrange(60))])  # fmt: skip
        hour = rng.choice(["*", "*", str(rng.randrange(24)), "9-17", "*/2", "*/6", "0,12"])
        day = rng.choice(["*", "*", "*", "1", "1-15"])
        weekday = rng.choice(["*", "*", "1-5", "0,6"])
        docs.append(
            {
                "_id": f"s{i}",
                "trigger": "cron",
                "cron": f"{minute} {hour} {day} * {weekday}",
                "timezone": rng.choice(ZONES),
                "enabled": True,
            }
        )
    return docs


def with_croniter(docs: list[dict], start: datetime, end: datetime) -> dict[str, list[datetime]]:
    result = {}
    for doc in docs:
        it = croniter(doc["cron"], start.astimezone(ZoneInfo(doc["timezone"])))
        times = []
        while (fire := it.get_next(datetime).astimezone(UTC)) <= end:
            times.append(fire)
        result[doc["_id"]] = times
    return result


def ours(docs: list[dict], start: datetime, span: timedelta, shared: bool) -> dict:
    if shared:
        return upcoming_by_schedule(docs, start, span)
    result = {}
    for doc in docs:  # one schedule at a time: nothing shared
        result.update(upcoming_by_schedule([doc], start, span))
    return result


def timed(fn, *args):
    started = time.perf_counter()
    value = fn(*args)
    return value, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--days", type=float, default=3.0)
    args = parser.parse_args()
    docs = expressions(args.schedules)
    span = timedelta(days=args.days)
    end = START + span
    mine, ours_s = timed(ours, docs, START, span, True)
    alone, alone_s = timed(ours, docs, START, span, False)
    theirs, croniter_s = timed(with_croniter, docs, START, end)
    identical = mine == theirs == alone
    dst_mine = ours(docs, DST_START, span, True)
    dst_theirs = with_croniter(docs, DST_START, DST_START + span)
    differing = sum(1 for key in dst_mine if dst_mine[key] != dst_theirs[key])
    figures = {
        "schedules": len(docs),
        "distinct_triggers": len({(d["cron"], d["timezone"]) for d in docs}),
        "fire_times": sum(len(v) for v in mine.values()),
        "ours_s": round(ours_s, 3),
        "ours_uncached_s": round(alone_s, 3),
        "croniter_s": round(croniter_s, 3),
        "speedup_uncached": round(croniter_s / alone_s, 2),
        "dst_window_differing": differing,
        "speedup_vs_croniter": round(croniter_s / ours_s, 2),
        "identical": identical,
    }
    for key, value in figures.items():
        print(f"{key:>22}  {value}")
    print(json.dumps(figures))
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
