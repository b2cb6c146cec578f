"""Drain on SIGTERM against SIGKILL: crawl a generated link graph of slow pages on the real
RabbitMQ with real `dramatiq` worker groups; in each trial stop the group at a random moment,
once with SIGTERM to its first process (as Kubernetes, docker and a KEDA scale-down send it)
and once, at the same moment of a fresh run, with SIGKILL; a new group finishes each run.

    .venv/bin/python benchmarks/bench_drain.py [--trials 5] [--pages 80] [--delay 0.4]
        [--batch 20] [--host-concurrency 2] [--drain 10] [--seed 1]

Per trial it checks the run from the site's access log and the store (tests/support/
fault_checks.py) and prints one row per trial, then one JSON line:

- `pages_lost`: pages never stored nor given up with a reason, over all trials (target 0);
- `pages_fetched_again_sigterm` / `_sigkill`: fetches beyond the first, summed over the
  trials of each signal (target 0 for SIGTERM: the drain records what it fetched);
- `drain_s_max`: the longest a SIGTERMed group took to exit, signal to exit;
- `drains_exit_nonzero`: SIGTERMed groups that exited with another code than 0;
- `drain_over_limit`: SIGTERMed groups that took longer than `--drain` plus the 15 s the
  README asks the grace period to leave for dramatiq's own stop.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import scratch  # noqa: E402
from tests.support.fault_distributed import TRIAL_ENV, Services, distributed_trial  # noqa: E402
from tests.support.fault_standalone import TrialOutcome, after_seconds  # noqa: E402
from tests.support.link_graph import layered_graph  # noqa: E402
from tests.support.mongo_server import MongoecoServer  # noqa: E402
from tests.support.rabbit import TestVhost  # noqa: E402

# The signal falls between these fractions of the uninterrupted crawl's duration.
EARLIEST, LATEST = 0.1, 0.7
SHUTDOWN_TAIL_S = 15.0  # what the README's grace period leaves after the drain


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=5, help="trials per signal")
    p.add_argument("--pages", type=int, default=80, help="pages in the link graph")
    p.add_argument("--delay", type=float, default=0.4, help="seconds the site takes per page")
    p.add_argument("--batch", type=int, default=20, help="pages per batch")
    p.add_argument("--host-concurrency", type=int, default=2, help="requests at once per host")
    p.add_argument("--drain", type=float, default=10.0, help="CRAWLSCHED_DRAIN_S")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--trial-timeout", type=float, default=600.0)
    args = p.parse_args(argv)
    if args.trials < 1 or args.pages < 10 or args.delay < 0 or args.drain <= 0:
        p.error("--trials >= 1, --pages >= 10, --delay >= 0, --drain > 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    graph = layered_graph(args.pages, args.seed, dead=max(args.pages // 20, 1), redirects=1)
    reachable = len(graph.reachable())
    env = {
        "CRAWLSCHED_DRAIN_S": f"{args.drain:g}",
        "CRAWLSCHED_HOST_CONCURRENCY": str(args.host_concurrency),
    }
    TRIAL_ENV.update(env)
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="bench-drain-"))
    mongo = MongoecoServer(start_timeout=120).start()
    vhost = TestVhost().create()
    services = Services(vhost.url, mongo.url)
    number = 0

    def trial(fault: str | None, after_s: float | None) -> TrialOutcome:
        nonlocal number
        number += 1
        moment = None if after_s is None else after_seconds(after_s)
        return distributed_trial(
            services, root / f"trial-{number}", graph, args.delay, fault, moment,
            end_within_s=args.trial_timeout, batch_limit=args.batch,
        )  # fmt: skip

    rows: list[dict] = []
    try:
        base = trial(None, None)
        baseline_s = base.duration_s
        print(
            f"graph: {reachable} reachable URLs, {args.delay} s a page, batches of "
            f"{args.batch}, {args.host_concurrency} at once; uninterrupted crawl "
            f"{baseline_s:.1f} s ({len(base.check.problems())} problems); drain {args.drain:g} s",
            flush=True,
        )
        print(f"{'#':>3} {'signal':>8} {'at s':>6} {'lost':>5} {'again':>6} {'exit':>5} "
              f"{'exit s':>7} problems")  # fmt: skip
        for i in range(args.trials):
            after_s = rng.uniform(EARLIEST, LATEST) * baseline_s
            for fault in ("worker_term", "worker"):
                outcome = trial(fault, after_s)
                check = outcome.check
                row = {
                    "signal": "SIGTERM" if fault == "worker_term" else "SIGKILL",
                    "signalled": outcome.fault_at is not None,
                    "pages_lost": len(check.pages_lost),
                    "fetched_again": check.fetched_twice,
                    "exit": outcome.drain_exit,
                    "exit_s": None if outcome.drain_s is None else round(outcome.drain_s, 2),
                    "problems": check.problems(),
                }
                rows.append(row)
                print(
                    f"{i + 1:>3} {row['signal']:>8} {after_s:>6.1f} {row['pages_lost']:>5} "
                    f"{row['fetched_again']:>6} {row['exit']!s:>5} {row['exit_s']!s:>7} "
                    f"{'; '.join(row['problems'])[:300] or '-'}",
                    flush=True,
                )
    finally:
        vhost.delete()
        mongo.stop()
        shutil.rmtree(root, ignore_errors=True)
        scratch.cleanup(keep=False)
    term = [r for r in rows if r["signal"] == "SIGTERM" and r["signalled"]]
    kill = [r for r in rows if r["signal"] == "SIGKILL" and r["signalled"]]
    exits = [r["exit_s"] for r in term if r["exit_s"] is not None]
    figures = {
        "trials_per_signal": args.trials,
        "signalled_sigterm": len(term),
        "signalled_sigkill": len(kill),
        "reachable": reachable,
        "baseline_s": round(baseline_s, 1),
        "drain_setting_s": args.drain,
        "pages_lost": sum(r["pages_lost"] for r in rows),
        "pages_fetched_again_sigterm": sum(r["fetched_again"] for r in term),
        "pages_fetched_again_sigkill": sum(r["fetched_again"] for r in kill),
        "drain_s_max": max(exits) if exits else None,
        "drains_exit_nonzero": sum(r["exit"] != 0 for r in term),
        "drain_over_limit": sum(s > args.drain + SHUTDOWN_TAIL_S for s in exits),
        "runs_with_problems": sum(bool(r["problems"]) for r in rows),
    }
    print(json.dumps(figures))
    return 0 if figures["pages_lost"] == 0 and figures["runs_with_problems"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
