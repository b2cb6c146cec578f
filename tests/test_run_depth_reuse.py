"""A running run's pages per depth (flow/views.by_depth) are counted over every page it found:
reused for a moment, counted again as soon as the run's state changes."""

from __future__ import annotations

import pytest

from crawlsched.catalog import JobState
from crawlsched.flow import views
from crawlsched.planning.run_names import run_id_for
from crawlsched.runtime import get_runtime


@pytest.fixture
def run(stub_broker):
    rt = get_runtime()
    rt.create_indexes()
    now = rt.now()
    run_id = run_id_for("sweep-websites", now)
    rt.runs.open(run_id, "sweep-websites", now, now)
    rt.runs.close_planning(run_id, 0, {}, now)
    rt.db.websites.insert_many(
        [
            {"target": f"http://127.0.0.1:9/p{i}", "scope_run": run_id, "depth": 1, "state": 1}
            for i in range(3)
        ]
    )
    return rt, run_id


def _depth_one(rt, run_id) -> dict:
    rows = views.by_depth(rt, rt.runs.get(run_id))
    return next(row for row in rows if row["depth"] == 1)


def test_the_count_is_reused_for_a_moment_and_read_again_when_the_run_ends(run, monkeypatch):
    rt, run_id = run
    monkeypatch.setattr(views, "DEPTH_REUSE_S", 3600.0)
    assert _depth_one(rt, run_id)["outstanding"] == 3

    # When a page ends but its run has not taken the report yet, the count is reused
    rt.db.websites.update_one({"depth": 1}, {"$set": {"state": int(JobState.DONE)}})
    assert _depth_one(rt, run_id)["outstanding"] == 3

    # and also after the run takes the page's report: its counts change many times a second
    rt.db.runs.update_one({"_id": run_id}, {"$set": {"counts": {"ok": 1}}})
    assert _depth_one(rt, run_id)["outstanding"] == 3

    # When the run's state changes (it ends), it is counted again
    rt.db.runs.update_one({"_id": run_id}, {"$set": {"state": "finished"}})
    assert _depth_one(rt, run_id) == {"depth": 1, "discovered": 3, "outstanding": 2, "done": 1}


def test_past_the_moment_the_count_is_read_again(run, monkeypatch):
    rt, run_id = run
    monkeypatch.setattr(views, "DEPTH_REUSE_S", 0.0)
    assert _depth_one(rt, run_id)["outstanding"] == 3
    rt.db.websites.update_one({"depth": 1}, {"$set": {"state": int(JobState.DONE)}})
    assert _depth_one(rt, run_id)["outstanding"] == 2


def test_a_caller_changing_the_rows_it_got_does_not_change_the_next_answer(run, monkeypatch):
    rt, run_id = run
    monkeypatch.setattr(views, "DEPTH_REUSE_S", 3600.0)
    _depth_one(rt, run_id)["discovered"] = 99
    assert _depth_one(rt, run_id)["discovered"] == 3


def test_the_timeline_frozen_at_the_run_s_end_counts_now_whatever_a_view_read(run, monkeypatch):
    from crawlsched.flow import run_timeline

    rt, run_id = run
    monkeypatch.setattr(views, "DEPTH_REUSE_S", 3600.0)
    assert _depth_one(rt, run_id)["outstanding"] == 3  # a live view, a moment before the end
    rt.db.websites.update_many({"depth": 1}, {"$set": {"state": int(JobState.DONE)}})

    frozen = run_timeline.freeze(rt, rt.runs.get(run_id))

    assert next(row for row in frozen["by_depth"] if row["depth"] == 1)["outstanding"] == 0
