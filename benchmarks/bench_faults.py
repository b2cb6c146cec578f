"""Fault injection: crawl a generated link graph of slow pages, kill one thing at a random
moment per trial, and check from the site's access log and the store that the run is still
exact. See benchmarks/README.md (bench_faults.py) for what each figure means.

    .venv/bin/python benchmarks/bench_faults.py [--faults standalone,worker,clock,rabbit_node,rabbit_stop,mongo_cut]
        [--trials 5] [--standalone-trials N] [--pages 300] [--delay 0.1] [--seed 1]
        [--dispatch-lease S] [--host-delay S] [--trial-timeout S] [--snapshot-interval S]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import scratch  # noqa: E402
from tests.support.fault_distributed import (  # noqa: E402
    CLUSTER_FAULTS,
    FAULTS,
    TRIAL_ENV,
    Services,
    distributed_trial,
)
from tests.support.fault_standalone import (  # noqa: E402
    TrialOutcome,
    after_seconds,
    standalone_trial,
)
from tests.support.link_graph import LinkGraph, depth_of, layered_graph  # noqa: E402
from tests.support.mongo_server import MongoecoServer  # noqa: E402
from tests.support.rabbit import TestVhost  # noqa: E402
from tests.support.rabbit_cluster import RabbitCluster, cluster_unavailable  # noqa: E402

KINDS = ("standalone", *FAULTS)
# The fault falls between these fractions of the uninterrupted crawl's duration.
EARLIEST, LATEST = 0.05, 0.8
COUNTS = ("pages_lost", "runs_ended_early", "runs_ended_twice", "ends_not_delivered")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", default=",".join(KINDS), help="comma-separated fault kinds")
    parser.add_argument("--trials", type=int, default=5, help="trials per fault kind")
    parser.add_argument("--standalone-trials", type=int, default=None, help="default: --trials")
    parser.add_argument("--pages", type=int, default=300, help="pages of the graph (≥ 1)")
    parser.add_argument("--delay", type=float, default=0.1, help="seconds per page served")
    parser.add_argument("--seed", type=int, default=1, help="graph and fault moments")
    parser.add_argument("--outage", type=float, default=5.0, help="mongo_cut: seconds cut")
    parser.add_argument("--trial-timeout", type=float, default=900, help="seconds per trial")
    parser.add_argument(
        "--snapshot-interval",
        type=float,
        default=None,
        help="CRAWLSCHED_SNAPSHOT_INTERVAL_S of the standalone trials (default: the test "
        "harness's 0.5; the server's own default is 2)",
    )
    parser.add_argument(
        "--dispatch-lease",
        type=float,
        default=float(TRIAL_ENV["CRAWLSCHED_DISPATCH_LEASE_S"]),
        help="CRAWLSCHED_DISPATCH_LEASE_S of the distributed trials' workers and clock (900: "
        "the default, so nothing a trial needs may wait for a lease to run out)",
    )
    parser.add_argument(
        "--host-delay",
        type=float,
        default=0.0,
        help="CRAWLSCHED_HOST_DELAY_S of the distributed trials (0: the site is not paced; "
        "above 0, a batch keeps the pages it finds of the host its process holds, and a kill "
        "finds kept pages)",
    )
    args = parser.parse_args(argv)
    args.faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = sorted(set(args.faults) - set(KINDS))
    if unknown:
        parser.error(f"--faults: unknown {unknown}; choose from {list(KINDS)}")
    if args.trials < 1 or args.pages < 1 or args.delay < 0:
        parser.error("--trials and --pages must be >= 1, --delay >= 0")
    if args.dispatch_lease <= 0:
        parser.error("--dispatch-lease must be > 0")
    return args


def trial_figures(kind: str, trial: TrialOutcome, baseline_s: float) -> dict:
    check = trial.check
    return {
        "kind": kind,
        "killed": trial.fault_at is not None,
        "fault_after_s": None if trial.fault_at is None else trial.fault_at - trial.started_at,
        "pages_lost": len(check.pages_lost),
        "run_ended_early": check.ended_early,
        "run_ended_twice": check.ended_twice,
        "end_not_delivered": not check.end_delivered,
        "pages_fetched_twice": check.fetched_twice,
        # Of those, fetches of pages whose end the store held at the kill (standalone only:
        # read from the data directory the kill left); the rest had not been recorded yet.
        "refetched_after_ending": getattr(trial, "refetched_after_ending", None),
        "given_up": check.expired,
        "result": check.result,
        "recovery_ratio": None if trial.recovery_s is None else trial.recovery_s / baseline_s,
        "problems": check.problems(),
    }


def failed_trial(kind: str, after_s: float, error: str) -> dict:
    """A trial that could not be checked (its run never ended within --trial-timeout)."""
    return {
        "kind": kind, "killed": True, "fault_after_s": after_s, "pages_lost": 0,
        "run_ended_early": False, "run_ended_twice": False, "end_not_delivered": True,
        "pages_fetched_twice": 0, "refetched_after_ending": None, "given_up": 0,
        "result": None, "recovery_ratio": None,
        "problems": [error[:500]], "error": True,
    }  # fmt: skip


def summarise(kind: str, rows: list[dict]) -> dict:
    ratios = [r["recovery_ratio"] for r in rows if r["recovery_ratio"] is not None]
    return {
        "trials": len(rows),
        "killed_mid_run": sum(r["killed"] for r in rows),
        "pages_lost": sum(r["pages_lost"] for r in rows),
        "runs_ended_early": sum(r["run_ended_early"] for r in rows),
        "runs_ended_twice": sum(r["run_ended_twice"] for r in rows),
        "ends_not_delivered": sum(r["end_not_delivered"] for r in rows),
        "pages_fetched_twice": sum(r["pages_fetched_twice"] for r in rows),
        "pages_given_up": sum(r["given_up"] for r in rows),
        "runs_with_problems": sum(bool(r["problems"]) for r in rows),
        "trials_not_checked": sum(bool(r.get("error")) for r in rows),
        "recovery_ratio": round(statistics.median(ratios), 2) if ratios else None,
    }


def print_table(kind: str, rows: list[dict], baseline_s: float) -> None:
    print(f"\n== {kind}: {len(rows)} trials, uninterrupted crawl {baseline_s:.1f} s")
    print(f"{'#':>3} {'fault at s':>10} {'lost':>5} {'early':>5} {'twice':>5} {'undeliv':>7} "
          f"{'refetch':>7} {'gave up':>7} {'result':>10} {'recovery':>8}")  # fmt: skip
    for i, r in enumerate(rows, 1):
        at = "-" if r["fault_after_s"] is None else f"{r['fault_after_s']:.1f}"
        ratio = "-" if r["recovery_ratio"] is None else f"{r['recovery_ratio']:.2f}"
        print(
            f"{i:>3} {at:>10} {r['pages_lost']:>5} {int(r['run_ended_early']):>5} "
            f"{int(r['run_ended_twice']):>5} {int(r['end_not_delivered']):>7} "
            f"{r['pages_fetched_twice']:>7} {r['given_up']:>7} {r['result']!s:>10} {ratio:>8}"
        )
        for problem in r["problems"]:
            print(f"      ! {problem[:600]}")


class Bench:
    def __init__(self, args: argparse.Namespace, graph: LinkGraph, root: Path) -> None:
        self.args, self.graph, self.root = args, graph, root
        self.rng = random.Random(args.seed)
        self.mongo: MongoecoServer | None = None
        self.vhost: TestVhost | None = None
        self.cluster: RabbitCluster | None = None
        self.trial_number = 0

    def workdir(self) -> Path:
        self.trial_number += 1
        return self.root / f"trial-{self.trial_number}"

    def services(self, kind: str) -> Services:
        if self.mongo is None:
            self.mongo = MongoecoServer(start_timeout=120).start()
        if kind in CLUSTER_FAULTS:
            if self.cluster is None:
                if reason := cluster_unavailable():
                    raise RuntimeError(f"no RabbitMQ cluster here: {reason}")
                self.cluster = RabbitCluster().start()
            return Services(self.cluster.url, self.mongo.url, self.cluster)
        if self.vhost is None:
            self.vhost = TestVhost().create()
        return Services(self.vhost.url, self.mongo.url)

    def runner(self, kind: str) -> Callable[[str | None, float | None], TrialOutcome]:
        a = self.args

        def run(fault: str | None, after_s: float | None) -> TrialOutcome:
            moment = None if after_s is None else after_seconds(after_s)
            if kind == "standalone":
                env = {}
                if a.snapshot_interval is not None:
                    env["CRAWLSCHED_SNAPSHOT_INTERVAL_S"] = f"{a.snapshot_interval:g}"
                return standalone_trial(
                    self.workdir(), self.graph, a.delay, moment, a.trial_timeout, **env
                )
            return distributed_trial(
                self.services(kind), self.workdir(), self.graph, a.delay, fault, moment,
                end_within_s=a.trial_timeout, outage_s=a.outage,
            )  # fmt: skip

        return run

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.remove()
        if self.vhost is not None:
            self.vhost.delete()
        if self.mongo is not None:
            self.mongo.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    TRIAL_ENV["CRAWLSCHED_DISPATCH_LEASE_S"] = f"{args.dispatch_lease:g}"
    TRIAL_ENV["CRAWLSCHED_HOST_DELAY_S"] = f"{args.host_delay:g}"
    graph = layered_graph(
        args.pages, args.seed, dead=max(args.pages // 20, 1), redirects=max(args.pages // 20, 1)
    )
    reachable = graph.reachable()
    print(
        f"graph: {len(reachable)} reachable URLs ({len(graph.stored())} pages, "
        f"{sum(p.startswith('/d/') for p in reachable)} dead links, "
        f"{sum(p.startswith('/r/') for p in reachable)} redirects), {depth_of(graph)} levels "
        f"deep, {args.delay} s per page; seed {args.seed}",
        flush=True,
    )
    root = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    bench = Bench(args, graph, root)
    figures: dict = {
        "pages": len(graph.stored()),
        "reachable": len(reachable),
        "delay_s": args.delay,
        "seed": args.seed,
        "by_fault": {},
    }
    baselines: dict[str, float] = {}
    all_rows: list[dict] = []
    started = time.monotonic()
    try:
        for kind in args.faults:
            run = bench.runner(kind)
            backend = (
                "standalone"
                if kind == "standalone"
                else "cluster"
                if kind in CLUSTER_FAULTS
                else "one node"
            )
            if backend not in baselines:
                base = run(None, None)
                baselines[backend] = base.duration_s
                print(f"  baseline ({backend}): {base.duration_s:.1f} s", flush=True)
                if problems := base.check.problems():
                    print(f"baseline of {kind} has problems: {problems}")
            baseline_s = baselines[backend]
            n = args.standalone_trials if kind == "standalone" and args.standalone_trials else 0
            rows = []
            for _ in range(n or args.trials):
                after_s = bench.rng.uniform(EARLIEST, LATEST) * baseline_s
                fault = None if kind == "standalone" else kind
                try:
                    rows.append(trial_figures(kind, run(fault, after_s), baseline_s))
                except (AssertionError, RuntimeError) as e:  # a run that never ended, say
                    rows.append(failed_trial(kind, after_s, f"{type(e).__name__}: {e}"))
                r = rows[-1]
                at = (
                    "none (ended first)"
                    if r["fault_after_s"] is None
                    else f"{r['fault_after_s']:.1f} s"
                )
                print(
                    f"  {kind} trial {len(rows)}: fault at {at}, {len(r['problems'])} problems",
                    flush=True,
                )
            print_table(kind, rows, baseline_s)
            twice = [r["pages_fetched_twice"] for r in rows if r["killed"]]
            figures["by_fault"][kind] = {
                "baseline_s": round(baseline_s, 1),
                **summarise(kind, rows),
                "fetched_twice_per_trial": [r["pages_fetched_twice"] for r in rows],
                "refetched_after_ending_per_trial": [r["refetched_after_ending"] for r in rows],
                # The target is per killed trial: the worst one, as a share of the reachable.
                "max_fetched_twice_share": round(max(twice) / len(reachable), 3) if twice else None,
            }
            all_rows += rows
    finally:
        bench.close()
        shutil.rmtree(root, ignore_errors=True)
        scratch.cleanup(keep=False)  # the processes' logs (tests/support/scratch.py)
    total = summarise("all", all_rows)
    keys = (*COUNTS, "pages_fetched_twice", "recovery_ratio", "runs_with_problems")
    figures.update({k: total[k] for k in (*keys, "trials_not_checked")})
    figures.update(trials=total["trials"], minutes=round((time.monotonic() - started) / 60, 1))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
