"""`crawlsched standalone` killed with `kill -9` mid-crawl and started again: its journal gives
the restart every write the store had applied, so a page whose end was written is never
fetched again, no count goes back, and the run is right by every invariant
(tests/support/fault_checks.py).

What is fetched again is what batches had fetched but not yet recorded when they died (a
batch records its crawled part at most every `CRAWLSCHED_DISCOVERY_FLUSH_S`, 0.5 s): the crawl
core's, not the store's. `refetched_after_ending` tells the two apart, from the data
directory the kill left.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fault_standalone import after_fetches, standalone_trial
from tests.support.link_graph import layered_graph

# 80 pages over four levels, 4 dead links, 4 redirects: 88 URLs to crawl.
GRAPH = layered_graph(80, seed=3, fan_out=3, dead=4, redirects=4)
REACHABLE = len(GRAPH.reachable())
DELAY_S = 0.1
# Without the journal a kill after 60 % of the fetches and no snapshot since the start
# fetched 60 % again; with it, only the pages in flight: a loose bound, with room for them.
MAX_FETCHED_TWICE = 0.25


@pytest.mark.parametrize(
    ("fraction", "snapshot_interval_s"),
    [
        pytest.param(0.6, "3600", id="no-snapshot-since-start"),
        pytest.param(0.3, "0.5", id="snapshots-every-0.5s"),
    ],
)
def test_kill_9_mid_crawl_loses_no_write_and_refetches_no_ended_page(
    tmp_path: Path, fraction: float, snapshot_interval_s: str
):
    # Given a crawl under way, when the server is killed after `fraction` of the fetches
    # (with snapshots that far apart: only the journal holds what came after the last one)
    # and started again on the same data directory
    trial = standalone_trial(
        tmp_path,
        GRAPH,
        DELAY_S,
        after_fetches(int(fraction * REACHABLE)),
        end_within_s=240,
        CRAWLSCHED_SNAPSHOT_INTERVAL_S=snapshot_interval_s,
    )
    assert trial.fault_at is not None, "the run ended before the kill"
    # Then the run is right by every invariant
    assert trial.check.problems() == [], trial.check
    # And every count the API showed just before the kill is there after the restart
    before, after = trial.counts_at_kill, trial.counts_after_restart
    assert before and before.get("succeeded", 0) > 0
    assert all(after.get(outcome, 0) >= n for outcome, n in before.items()), (before, after)
    # And no page whose end the store held at the kill was fetched again
    assert trial.ended_at_kill
    assert trial.refetched_after_ending == 0
    ratio = trial.check.fetched_twice / REACHABLE
    print(
        f"kill after {fraction:.0%} of {REACHABLE}: fetched twice {trial.check.fetched_twice} "
        f"({ratio:.1%}), ended at the kill {len(trial.ended_at_kill)}, counts {before} -> "
        f"{after}, recovery {trial.recovery_s:.1f}s"
    )
    assert ratio <= MAX_FETCHED_TWICE
