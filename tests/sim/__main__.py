"""Run a simulation scenario over seeds and print one JSON line.

    python -m tests.sim --scenario toy --seed 7      # one run, its result
    python -m tests.sim --scenario toy --seeds 0-99  # many runs, totals

A failing seed prints, on stderr, the command that replays it. The simulation needs a fixed
hash seed (the code under test may iterate sets of strings): without PYTHONHASHSEED=0 the CLI
starts itself again with it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from tests.sim.crawl_scenario import crawl, drained, small, varied
from tests.sim.scenarios import SCENARIOS

SCENARIOS.update(crawl=crawl, quiet=small, varied=varied, drain=drained)


def _seeds(text: str) -> range:
    first, _, last = text.partition("-")
    if not first.isdigit() or not last.isdigit() or int(last) < int(first):
        raise argparse.ArgumentTypeError(f"--seeds takes A-B with A <= B, got {text!r}")
    return range(int(first), int(last) + 1)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", default="toy", choices=sorted(SCENARIOS))
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=int)
    which.add_argument("--seeds", type=_seeds)
    return parser


def replay_command(scenario: str, seed: int) -> str:
    return f"PYTHONHASHSEED=0 {sys.executable} -m tests.sim --scenario {scenario} --seed {seed}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        os.execve(sys.executable, [sys.executable, "-m", "tests.sim", *argv], env)
    args = _parser().parse_args(argv)
    run = SCENARIOS[args.scenario]
    if args.seed is not None:
        result = run(args.seed)
        print(json.dumps({"scenario": args.scenario, **result.as_json()}))
        if not result.ok:
            print(f"replay: {replay_command(args.scenario, args.seed)}", file=sys.stderr)
        return 0 if result.ok else 1
    started, steps, crashes, failed = time.perf_counter(), 0, 0, []
    for seed in args.seeds:
        result = run(seed)
        steps, crashes = steps + result.steps, crashes + result.crashes
        if not result.ok:
            failed.append(seed)
            print(f"seed {seed}: {result.violations[0]}", file=sys.stderr)
            print(f"replay: {replay_command(args.scenario, seed)}", file=sys.stderr)
    elapsed = time.perf_counter() - started
    print(json.dumps({
        "scenario": args.scenario,
        "schedules": len(args.seeds),
        "crashes": crashes,
        "invariants_broken": len(failed),
        "failed_seeds": failed,
        "steps": steps,
        "schedules_per_s": round(len(args.seeds) / elapsed, 2),
        "steps_per_s": round(steps / elapsed),
    }))  # fmt: skip
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
