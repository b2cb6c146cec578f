"""bench_simulation: the crawl core under deterministic simulation, over many seeds.

Each seed is one run of `tests/sim/crawl_scenario.py`: simulated worker processes (the
project's real ticker, planner, gatekeepers, crawl loop and coordinator, through the actors'
handlers), a simulated clock and web, one embedded store; processes crash at store writes,
sends and acks and come back, messages come twice and out of order; after each run the
invariants of `tests/sim/crawl_checks.py` are checked. `crawl` keeps one shape (3 processes of
2 threads, 3 hosts of about 10 pages, up to 3 crashes); `varied` draws the shape from the seed
(1 to 4 processes, 1 to 3 threads, 1 to 4 hosts, up to 6 crashes, 0 to 10 % of messages twice,
host delays from 0 to 2 s).

    .venv/bin/python benchmarks/bench_simulation.py [--seeds 1-2000] [--scenarios crawl,varied]

Runs itself with PYTHONHASHSEED=0 (the code under test iterates sets of strings). Ends with
one JSON line: `schedules` (runs explored), `crashes` (injected), `invariants_broken`,
`schedules_per_s`, `steps` and `steps_per_s`, per scenario and in all; a broken invariant
prints the seed and the command that replays it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1-2000", help="A-B, inclusive (each scenario)")
    parser.add_argument("--scenarios", default="crawl,varied")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    started = time.perf_counter()
    results = {}
    for scenario in [s.strip() for s in args.scenarios.split(",") if s.strip()]:
        done = subprocess.run(
            [sys.executable, "-m", "tests.sim", "--scenario", scenario, "--seeds", args.seeds],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith('{"scenario"')]
        if not lines:
            print(done.stderr[-4000:], file=sys.stderr)
            return 2
        results[scenario] = json.loads(lines[-1])
        for line in done.stderr.splitlines():
            if line.startswith(("seed ", "replay:")):
                print(line, file=sys.stderr)
    wall_s = time.perf_counter() - started
    total = {
        key: sum(r[key] for r in results.values())
        for key in ("schedules", "crashes", "invariants_broken", "steps")
    }
    total["schedules_per_s"] = round(total["schedules"] / wall_s, 2)
    total["steps_per_s"] = round(total["steps"] / wall_s)
    total["by_scenario"] = {
        name: {k: r[k] for k in ("schedules", "crashes", "invariants_broken", "schedules_per_s")}
        for name, r in results.items()
    }
    total["failed_seeds"] = {name: r["failed_seeds"] for name, r in results.items()}
    print(f"{'scenario':<10} {'schedules':>9} {'crashes':>8} {'broken':>7} {'sched/s':>8}")
    for name, r in results.items():
        print(
            f"{name:<10} {r['schedules']:>9} {r['crashes']:>8} {r['invariants_broken']:>7} "
            f"{r['schedules_per_s']:>8}"
        )
    print(json.dumps(total))
    return 0 if total["invariants_broken"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
