"""Adaptive vs fixed recrawl intervals over a simulated month, at the same number of fetches.

N pages (default 1,000) change as Poisson processes whose mean times between changes are spread
log-uniformly over `--spread` (default 100x: from `--fastest-h` 2 h to 200 h), or put at its two
ends (`--rates ends`: half as fast as the fastest, half as slow as the slowest). Pure simulation,
no store: the clock is a number, and the adaptive side runs the real rule
(`crawlsched.planning.recrawl.revisit`, with the settings' default method, its parameters and
jitter, and the packaged `web` media's bounds: 1 h to 30 days), every page starting at
`--start-h` (24 h), first fetched at a random moment of its first interval.

  adaptive  each fetch tells the rule whether the page changed since the previous fetch (the
            first fetch finds it new); the next fetch is one (jittered) interval later
  fixed     every page every T, first fetched at a random moment of its first T; T is tuned
            (bisection) so that the fixed side makes the same number of fetches in the month

  useful_fetch_share  share of fetches that found a change since the page's previous fetch
                      (a first fetch counts as finding nothing): adaptive / fixed (target >= 1.5)
  oracle_useful_fetch_share  context, the ceiling: the same ratio for an oracle that knows
                      each page's rate and crawls it every c times its mean time between changes
                      (within the rule's bounds; c bisected to the same number of fetches),
                      simulated on the same change times, first fetch at a random moment.
                      For Poisson changes, equal intervals proportional to the mean give the
                      most useful fetches for a budget (the expected useful count of a page,
                      sum of 1 - exp(-interval/mean), is concave in the intervals), so no rule
                      that learns the rates from its own fetches does better
  wait_ratio          mean time from a change to the first fetch after it, adaptive / fixed
                      (target <= 1: not worse); a change no fetch sees within the month waits
                      until its end, on both sides

    .venv/bin/python benchmarks/bench_recrawl.py [--pages 1000] [--days 30] [--spread 100]
                                                 [--rates log-uniform|ends]
                                                 [--fastest-h 2] [--start-h 24] [--seed 1]
                                                 [--method estimate|steps]
                                                 [--interval-per-mean C] [--memory M]
                                                 [--inc-rate R] [--dec-rate R] [--jitter F]

Last line: JSON with the ratios and the counts behind them.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import math
import random
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawlsched.planning.recrawl import (  # noqa: E402
    Evidence,
    RecrawlPolicy,
    draw_for,
    revisit,
)
from crawlsched.settings import Settings  # noqa: E402

HOUR, DAY = 3600.0, 86400.0
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Tally:
    fetches: int = 0
    useful: int = 0
    waits: list[float] = field(default_factory=list)
    unseen: int = 0  # changes no fetch saw within the month

    @property
    def useful_share(self) -> float:
        return self.useful / self.fetches if self.fetches else 0.0

    @property
    def mean_wait_h(self) -> float:
        return sum(self.waits) / len(self.waits) / HOUR if self.waits else 0.0


def pages(
    n: int, spread: float, fastest_s: float, month_s: float, seed: int, rates: str = "log-uniform"
) -> tuple[list[float], list[list[float]]]:
    """Each page's mean time between changes, and its change times in the month (a Poisson
    process of its own rate). `rates`: the means log-uniform over the spread, or at its two
    ends (`ends`: half the pages as fast as the fastest, half as slow as the slowest)."""
    rng = random.Random(seed)
    means, changes = [], []
    for _ in range(n):
        at = rng.random()
        mean = fastest_s * spread ** (at if rates == "log-uniform" else float(at >= 0.5))
        t, times = rng.expovariate(1 / mean), []
        while t < month_s:
            times.append(t)
            t += rng.expovariate(1 / mean)
        means.append(mean)
        changes.append(times)
    return means, changes


def oracle_fetches(
    means: list[float], c: float, bounds: tuple[float, float], month_s: float, seed: int
) -> list[list[float]]:
    """An oracle that knows every page's mean time between changes and crawls it every
    `c` times that (clamped to the rule's bounds), first at a random moment of its first interval.
    For Poisson changes, equal intervals proportional to the mean are the best any rule can do
    with a page's share of the fetches: what it reaches is the ceiling of `useful_fetch_share`."""
    rng = random.Random(seed + 3)
    schedule = []
    for mean in means:
        interval = min(bounds[1], max(bounds[0], c * mean))
        t, fetches = rng.random() * interval, []
        while t < month_s:
            fetches.append(t)
            t += interval
        schedule.append(fetches)
    return schedule


def matched_oracle(
    means: list[float], target: int, bounds: tuple[float, float], month_s: float, seed: int
) -> list[list[float]]:
    """The oracle's schedule that makes `target` fetches (the closest bisection on c finds)."""
    lo, hi = 1e-3, 1e3
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if sum(map(len, oracle_fetches(means, mid, bounds, month_s, seed))) > target:
            lo = mid
        else:
            hi = mid
    return oracle_fetches(means, hi, bounds, month_s, seed)


def tally(changes: list[list[float]], fetch_times: list[list[float]], month_s: float) -> Tally:
    out = Tally()
    for page_changes, fetches in zip(changes, fetch_times, strict=True):
        out.fetches += len(fetches)
        for before, at in itertools.pairwise(fetches):
            lo, hi = (
                bisect.bisect_right(page_changes, before),
                bisect.bisect_right(page_changes, at),
            )
            out.useful += hi > lo
        for c in page_changes:
            i = bisect.bisect_right(fetches, c)
            if i < len(fetches):
                out.waits.append(fetches[i] - c)
            else:
                out.waits.append(month_s - c)
                out.unseen += 1
    return out


def adaptive_fetches(
    changes: list[list[float]], policy: RecrawlPolicy, start_s: float, month_s: float, seed: int
) -> list[list[float]]:
    rng = random.Random(seed + 1)
    schedule = []
    for page, page_changes in enumerate(changes):
        t, state, fetches = rng.random() * start_s, None, []
        while t < month_s:
            if fetches:
                seen = bisect.bisect_right(page_changes, t) - bisect.bisect_right(
                    page_changes, fetches[-1]
                )
                evidence = Evidence(changed=1) if seen else Evidence(unchanged=1)
            else:
                evidence = Evidence(new=1)
            fetches.append(t)
            moment = EPOCH + timedelta(seconds=t)
            found = revisit(
                start_s, state, evidence, policy, moment, lambda v, p=page: draw_for(p, v)
            )
            state = found.state
            t += found.delay_s
        schedule.append(fetches)
    return schedule


def fixed_fetches(n: int, interval_s: float, month_s: float, seed: int) -> list[list[float]]:
    rng = random.Random(seed + 2)
    schedule = []
    for _ in range(n):
        first = rng.random() * interval_s
        schedule.append([first + k * interval_s for k in range(math.ceil((month_s - first)
                                                                          / interval_s))])  # fmt: skip
    return schedule


def matched_interval(n: int, target: int, month_s: float, seed: int) -> float:
    """The fixed interval whose schedule makes `target` fetches (the closest bisection finds)."""
    lo, hi = 60.0, month_s * 2
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        count = sum(map(len, fixed_fetches(n, mid, month_s, seed)))
        if count > target:
            lo = mid
        else:
            hi = mid
    return hi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--spread", type=float, default=100)
    parser.add_argument(
        "--rates",
        choices=("log-uniform", "ends"),
        default="log-uniform",
        help="pages' mean times between changes: log-uniform over the spread, or at its ends",
    )
    parser.add_argument("--fastest-h", type=float, default=2)
    parser.add_argument("--start-h", type=float, default=24)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--method", choices=("estimate", "steps"), help="default: the settings'")
    parser.add_argument("--interval-per-mean", type=float, help="default: the settings'")
    parser.add_argument("--memory", type=float, help="default: the settings'")
    parser.add_argument("--inc-rate", type=float, help="default: the settings'")
    parser.add_argument("--dec-rate", type=float, help="default: the settings'")
    parser.add_argument("--jitter", type=float, help="default: the settings'")
    args = parser.parse_args()

    started = time.perf_counter()
    month_s = args.days * DAY
    settings = Settings()
    policy = RecrawlPolicy(
        adaptive=True,
        min_interval_s=HOUR,
        max_interval_s=30 * DAY,
        inc_rate=settings.recrawl_inc_rate if args.inc_rate is None else args.inc_rate,
        dec_rate=settings.recrawl_dec_rate if args.dec_rate is None else args.dec_rate,
        jitter=settings.recrawl_jitter if args.jitter is None else args.jitter,
        method=args.method or settings.recrawl_method,
        interval_per_mean=args.interval_per_mean or settings.recrawl_interval_per_mean,
        memory=args.memory or settings.recrawl_memory,
    )
    means, changes = pages(
        args.pages, args.spread, args.fastest_h * HOUR, month_s, args.seed, args.rates
    )
    adaptive = tally(
        changes,
        adaptive_fetches(changes, policy, args.start_h * HOUR, month_s, args.seed),
        month_s,
    )
    interval = matched_interval(args.pages, adaptive.fetches, month_s, args.seed)
    fixed = tally(changes, fixed_fetches(args.pages, interval, month_s, args.seed), month_s)
    elapsed = time.perf_counter() - started

    share_ratio = adaptive.useful_share / fixed.useful_share
    oracle = tally(
        changes,
        matched_oracle(means, adaptive.fetches, (HOUR, 30 * DAY), month_s, args.seed),
        month_s,
    )
    oracle_ratio = oracle.useful_share / fixed.useful_share
    wait_ratio = adaptive.mean_wait_h / fixed.mean_wait_h
    print(
        f"{args.pages} pages over {args.days:g} days, mean time between changes "
        f"{args.fastest_h:g} h to {args.fastest_h * args.spread:g} h ({args.rates}, Poisson); "
        f"{sum(map(len, changes))} changes"
    )
    rule = (
        f"every {policy.interval_per_mean:g} x the estimated mean, memory {policy.memory:g}"
        if policy.method == "estimate"
        else f"rates +{policy.inc_rate:g}/-{policy.dec_rate:g}"
    )
    print(f"adaptive: {policy.method} ({rule}), jitter {policy.jitter:g}, "
          f"1 h to 30 d, from {args.start_h:g} h; fixed: every {interval / HOUR:.2f} h")  # fmt: skip
    print()
    print(f"{'':<10}{'fetches':>9}{'useful':>9}{'share':>8}{'mean wait h':>13}{'unseen':>8}")
    for name, t in (("adaptive", adaptive), ("fixed", fixed), ("oracle", oracle)):
        print(
            f"{name:<10}{t.fetches:>9}{t.useful:>9}{t.useful_share:>8.3f}"
            f"{t.mean_wait_h:>13.2f}{t.unseen:>8}"
        )
    print()
    print(f"useful_fetch_share adaptive/fixed = {share_ratio:.2f}   (target >= 1.5)")
    print(f"  (ceiling: an oracle knowing each page's rate, intervals proportional: "
          f"{oracle_ratio:.2f})")  # fmt: skip
    print(f"mean wait adaptive/fixed          = {wait_ratio:.2f}   (target <= 1)")
    print(f"fetches adaptive/fixed            = {adaptive.fetches / fixed.fetches:.4f}")
    print(f"(simulated in {elapsed:.1f} s)")
    print(
        json.dumps(
            {
                "pages": args.pages,
                "days": args.days,
                "spread": args.spread,
                "rates": args.rates,
                "method": policy.method,
                "changes": sum(map(len, changes)),
                "fetches_adaptive": adaptive.fetches,
                "fetches_fixed": fixed.fetches,
                "fixed_interval_h": round(interval / HOUR, 3),
                "useful_share_adaptive": round(adaptive.useful_share, 4),
                "useful_share_fixed": round(fixed.useful_share, 4),
                "useful_share_oracle": round(oracle.useful_share, 4),
                "fetches_oracle": oracle.fetches,
                "wait_ratio_oracle": round(oracle.mean_wait_h / fixed.mean_wait_h, 3),
                "useful_fetch_share": round(share_ratio, 3),
                "oracle_useful_fetch_share": round(oracle_ratio, 3),
                "wait_ratio": round(wait_ratio, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
