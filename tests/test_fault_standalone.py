"""`crawlsched standalone` killed with `kill -9` early and late in the crawl of a
slow link graph, then started again on the same data directory: every reachable page is
fetched and stored in the run or given up with a reason, nothing is counted twice, the run
ends once (after its last fetch, with the result its pages call for) and its webhook arrives,
no lease is held and nothing is left running (tests/support/fault_checks.py).

A kill in the middle is `test_standalone.py`'s; kills at random moments, many trials, are the
`standalone` fault of `benchmarks/bench_faults.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fault_standalone import after_fetches, standalone_trial
from tests.support.link_graph import layered_graph

# 40 pages over four levels, 3 dead links, 3 redirects: 46 URLs to crawl.
GRAPH = layered_graph(40, seed=25, fan_out=3, dead=3, redirects=3)
REACHABLE = len(GRAPH.reachable())
DELAY_S = 0.3  # per page: a batch is in flight long enough to be killed


@pytest.mark.parametrize(
    "moment",
    [
        pytest.param(3, id="early"),
        pytest.param(REACHABLE - 4, id="late"),
    ],
)
def test_standalone_kill_9_then_restart_loses_no_page(tmp_path: Path, moment: int):
    # Given a crawl of the graph under way, when the server is killed after `moment` fetches
    # and started again on the same data directory
    trial = standalone_trial(tmp_path, GRAPH, DELAY_S, after_fetches(moment))

    # Then the run is right by every invariant, and the kill did happen mid-run
    assert trial.fault_at is not None, "the run ended before the kill"
    assert trial.check.problems() == [], trial.check
    print(
        f"kill after {moment} fetches: outcomes {trial.check.outcomes}, "
        f"fetched twice {trial.check.fetched_twice}, recovery {trial.recovery_s:.1f}s"
    )
