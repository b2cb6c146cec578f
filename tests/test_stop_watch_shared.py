"""The stop checks between jobs are shared by the batches of one run in a process: one read per
`stop_check_s` however many threads crawl the run; each batch's first read is its own."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from crawlsched.flow.stop_watch import StopWatch
from crawlsched.planning.run_names import run_id_for
from crawlsched.runtime import get_runtime


@pytest.fixture
def watched(stub_broker, monkeypatch):
    rt = get_runtime()
    rt.create_indexes()
    now = rt.now()
    run_id = run_id_for("sweep-websites", now)
    rt.runs.open(run_id, "sweep-websites", now, now)
    clock = SimpleNamespace(now=100.0)
    monkeypatch.setattr(rt.env, "monotonic", lambda: clock.now)
    reads: list[str] = []
    real = rt.runs.hold_state

    def counted(run: str, task: str):
        reads.append(run)
        return real(run, task)

    monkeypatch.setattr(rt.runs, "hold_state", counted)
    return rt, run_id, clock, reads


def test_four_batches_of_one_run_read_its_state_once_a_check_period(watched):
    rt, run_id, clock, reads = watched
    every = rt.settings.stop_check_s
    watches = [StopWatch(rt, run_id, "article") for _ in range(4)]

    # Each batch's first read is its own
    assert [w.stopped() for w in watches] == [False] * 4
    assert len(reads) == 4

    # Then, period after period, the four share one read
    for period in range(1, 4):
        clock.now += every
        assert [w.stopped() for w in watches] == [False] * 4
        assert len(reads) == 4 + period


def test_a_stop_read_by_one_batch_stops_the_others_and_a_new_batch_reads_it_itself(watched):
    rt, run_id, clock, reads = watched
    first, second = StopWatch(rt, run_id, "article"), StopWatch(rt, run_id, "article")
    assert not first.stopped() and not second.stopped()

    rt.db.runs.update_one({"_id": run_id}, {"$set": {"stop_requested": True}})
    clock.now += rt.settings.stop_check_s
    assert first.stopped()  # its read
    assert second.stopped()  # the shared read, no read of its own
    assert len(reads) == 3

    # A batch that starts within the period still reads for itself
    assert StopWatch(rt, run_id, "article").stopped()
    assert len(reads) == 4
