"""The coordinator refuses a report whose dispatch still holds jobs, even when some of its jobs
have already ended: counting such an early report would take the report key of the genuine
one, which would then be dropped as a duplicate, and the run would never end.

`record_report` is called directly on a runtime over the embedded store (no worker); the run
is built through the stores, as in test_hostile_messages.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from crawlsched.catalog import JobState
from crawlsched.errors import ReportRejected
from crawlsched.flow.coordination import record_report
from crawlsched.messages import ReportMessage
from crawlsched.planning.outcomes import after_success
from crawlsched.planning.run_names import FINISHED, RUNNING
from crawlsched.runtime import get_runtime
from crawlsched.store.job_claims import ClaimRequest

RUN = "sched-held@20240601T120000Z"


@pytest.fixture
def rt(stub_broker):
    rt = get_runtime()
    rt.create_indexes()
    return rt


def _claimed_run(rt, n: int) -> tuple[str, list]:
    """A run whose planning closed over n jobs, all claimed by one dispatch."""
    now = rt.now()
    rt.jobs("profiles").insert_new(
        [
            {
                "target": f"held{i}",
                "media_name_id": 1,
                "task": "profile",
                "state": int(JobState.PENDING),
                "execution_date": now - timedelta(seconds=1),
            }
            for i in range(n)
        ]
    )
    job_ids = [d["_id"] for d in rt.db.profiles.find({"target": {"$regex": "^held"}})]
    dispatch = uuid.uuid4().hex
    rt.runs.open(RUN, RUN.split("@", maxsplit=1)[0], now, now)
    rt.jobs("profiles").claim([ClaimRequest(dispatch, job_ids)], RUN, now + timedelta(hours=1))
    rt.runs.close_planning(RUN, len(job_ids), {}, now)
    return dispatch, job_ids


def _finish(rt, dispatch: str, job_ids: list) -> None:
    updates = [after_success(j, None, rt.now(), discovered=0) for j in job_ids]
    rt.jobs("profiles").record(dispatch, updates, rt.now())


def _report(dispatch: str) -> ReportMessage:
    return ReportMessage(run_id=RUN, dispatch_id=dispatch, collection="profiles", phase="crawl")


def test_an_early_report_of_a_partly_finished_dispatch_is_refused_and_the_genuine_one_ends_the_run(
    rt,
):
    dispatch, job_ids = _claimed_run(rt, 3)
    # Given two of the dispatch's three jobs ended and one still held by it
    _finish(rt, dispatch, job_ids[:2])
    seen = rt.jobs("profiles").dispatch_report(dispatch, RUN, ["succeeded"])
    assert (seen.held, seen.counts) == (1, {"succeeded": 2})  # the earlier check passes
    before = rt.runs.get(RUN)

    # When a report for that dispatch arrives early, it is refused for the job still held
    with pytest.raises(ReportRejected, match="still holds 1 jobs"):
        record_report(rt, _report(dispatch))
    after = rt.runs.get(RUN)
    assert (after["state"], after["outstanding"], after["counts"]) == (
        before["state"],
        before["outstanding"],
        before["counts"],
    )

    # Then the genuine report, once the dispatch let go of every job, counts all three and ends
    # the run (it was not taken for a duplicate of the early one).
    _finish(rt, dispatch, job_ids[2:])
    assert record_report(rt, _report(dispatch)) is True
    run = rt.runs.get(RUN)
    assert (run["state"], run["outstanding"], run["counts"]) == (FINISHED, 0, {"succeeded": 3})


def test_a_report_of_a_dispatch_holding_every_job_is_refused_too(rt):
    dispatch, _ = _claimed_run(rt, 2)
    with pytest.raises(ReportRejected):
        record_report(rt, _report(dispatch))
    assert rt.runs.get(RUN)["state"] == RUNNING
