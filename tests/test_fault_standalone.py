"""`crawlsched standalone` killed with `kill -9` early and late in the crawl of a
slow link graph, then started again on the same data directory: every reachable page is
fetched and stored in the run or given up with a reason, nothing is counted twice, the run
ends once (after its last fetch, with the result its pages call for) and its webhook arrives,
no lease is held and nothing is left running (tests/support/fault_checks.py).

A kill the moment `run now` has answered (the run then existed only in memory and in a plan
message of the in-process broker: both went with the process, and the run never came) is the
first case. A kill in the middle is `test_standalone.py`'s; kills at random moments, many
trials, are the `standalone` fault of `benchmarks/bench_faults.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fault_standalone import after_fetches, after_seconds, standalone_trial
from tests.support.link_graph import layered_graph

# 40 pages over four levels, 3 dead links, 3 redirects: 46 URLs to crawl.
GRAPH = layered_graph(40, seed=25, fan_out=3, dead=3, redirects=3)
REACHABLE = len(GRAPH.reachable())
DELAY_S = 0.3  # per page: a batch is in flight long enough to be killed


@pytest.mark.parametrize(
    "moment",
    [
        pytest.param(None, id="as-run-now-answers"),
        pytest.param(3, id="early"),
        pytest.param(REACHABLE - 4, id="late"),
    ],
)
def test_standalone_kill_9_then_restart_loses_no_page(tmp_path: Path, moment: int | None):
    # Given a crawl of the graph under way, when the server is killed after `moment` fetches
    # (or as soon as `run now` answered) and started again on the same data directory
    when = after_seconds(0) if moment is None else after_fetches(moment)
    trial = standalone_trial(tmp_path, GRAPH, DELAY_S, when, end_within_s=240)

    # Then the run is right by every invariant, and the kill did happen mid-run
    assert trial.fault_at is not None, "the run ended before the kill"
    assert trial.check.problems() == [], trial.check
    print(
        f"kill after {moment} fetches: outcomes {trial.check.outcomes}, "
        f"fetched twice {trial.check.fetched_twice}, recovery {trial.recovery_s:.1f}s"
    )
