"""The crawl core under deterministic simulation (`tests/sim/crawl_scenario.py`): simulated
worker processes, clock and web in one thread at a time, crashes between store writes (and at
sends and acks), messages delivered twice and out of order; after each run, the invariants of
`tests/sim/crawl_checks.py`. A bounded number of seeds here; `benchmarks/bench_simulation.py`
runs many more. A failing seed prints the command that replays it.

Run in a subprocess: the simulation needs a fixed hash seed (`PYTHONHASHSEED=0`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _simulate(*args: str, timeout: float = 900) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.sim", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith('{"scenario"')]
    assert lines, f"no result line (exit {done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(lines[-1]), done.stderr


@pytest.mark.parametrize(
    ("scenario", "seeds"),
    [("crawl", "1-90"), ("varied", "1-150"), ("quiet", "1-20")],
)
def test_the_crawl_core_keeps_its_invariants_over_simulated_crashes(scenario, seeds):
    result, stderr = _simulate("--scenario", scenario, "--seeds", seeds)
    replays = [line for line in stderr.splitlines() if "replay" in line or line.startswith("seed")]
    assert result["invariants_broken"] == 0, "\n".join(replays)
    first, last = (int(n) for n in seeds.split("-"))
    assert result["schedules"] == last - first + 1
    if scenario not in ("quiet", "drain"):
        assert result["crashes"] > result["schedules"] / 2  # crashes were injected, and many


def test_worker_processes_told_to_stop_drain_in_a_page_s_time_and_refetch_nothing():
    # Each seed stops 1 to 3 worker processes mid-crawl (SIGTERM: `env.draining()`), starting
    # each again once drained; with no crash and no duplicate, every page is fetched once, and
    # each drain ends within a page's time (crawl_checks.drains_bounded).
    result, stderr = _simulate("--scenario", "drain", "--seeds", "1-60")
    replays = [line for line in stderr.splitlines() if "replay" in line or line.startswith("seed")]
    assert result["invariants_broken"] == 0, "\n".join(replays)
    assert result["schedules"] == 60 and result["crashes"] == 0
    one, _ = _simulate("--scenario", "drain", "--seed", "3")
    assert one["drained"] >= 1 and one["drain_s_max"] is not None  # drains did happen


def test_a_seed_replays_to_the_same_steps():
    one, _ = _simulate("--scenario", "crawl", "--seed", "11")
    again, _ = _simulate("--scenario", "crawl", "--seed", "11")
    other, _ = _simulate("--scenario", "crawl", "--seed", "12")
    assert one["ok"] and one["crashes"] > 0 and one["requests"] > 10
    assert one["trace_hash"] == again["trace_hash"] and one["steps"] == again["steps"]
    assert other["trace_hash"] != one["trace_hash"]


# Seeds past the ranges above that once broke an invariant, kept as cheap regression runs
# (a change to the code changes every trace, so each may exercise another path in time):
# 172: a late copy of a batch registered children of a page the other copy gave up;
# 234: a copy took pages over into a dispatch whose report the other copy had counted (the
#      run waited for them for ever);
# 389: a copy kept, and crawled, the children of a page another copy recorded (counted off
#      before the run counted them in: the run ended early);
# drain 409: a batch whose host refused one page twice counted one refusal on the page when
#      it gave it back: fetched a fourth time, it ended succeeded instead of given up.
@pytest.mark.parametrize(
    ("scenario", "seed"), [("varied", 172), ("varied", 234), ("varied", 389), ("drain", 409)]
)
def test_seeds_that_once_broke_an_invariant_keep_it(scenario, seed):
    result, stderr = _simulate("--scenario", scenario, "--seed", str(seed))
    assert result["ok"], (result["violations"], stderr[-2000:])
