"""Recovery, proven directly: dispatch leases that ran out are reclaimed (and only those), a late
write from the dispatch that lost its jobs changes nothing, and a planner delivery that crashed
half-way is completed by the redelivery without dispatching any job twice or finishing early.

The stub broker and real actors carry the reports; the flow functions are called directly where
the test needs to stop them half-way.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from crawlsched.catalog import JobState
from crawlsched.demo.seed import demo_reference
from crawlsched.flow.planning import plan_run
from crawlsched.flow.ticking import reclaim_expired
from crawlsched.planning.outcomes import Outcome, after_success
from crawlsched.runtime import get_runtime
from crawlsched.store.jobs import ClaimRequest
from crawlsched.store.runs import FINISHED, PLANNING, RUNNING, run_id_for


def _websites(rt, n: int) -> list:
    now = rt.now()
    news = rt.reference.media_by_name("web")
    rt.jobs("websites").insert_new(
        [
            {
                "target": f"http://127.0.0.1:9/page{i}",
                "media_name": "web",
                "media_name_id": news["_id"],
                "task": "article",
                "state": int(JobState.PENDING),
                "enabled": True,
                "execution_date": now - timedelta(seconds=1),
                "human_validation": 0,
                "certitude": 0.5,
                "modified_at": now - timedelta(minutes=i),
                "attempt_count": 0,
            }
            for i in range(n)
        ]
    )
    return [d["_id"] for d in rt.db.websites.find({}, {"_id": 1})]


@pytest.fixture
def rt(stub_broker, stub_worker):
    runtime = get_runtime()
    runtime.create_indexes()
    runtime.reference.load(demo_reference("http://127.0.0.1:9"))
    runtime.schedules.ensure_defaults(runtime.now())
    return runtime


def _drain(broker, worker) -> None:
    broker.join("crawlsched.done", fail_fast=True)
    worker.join()


def test_only_dispatches_whose_lease_ran_out_are_reclaimed(rt, stub_broker, stub_worker):
    # Given one run: dispatch `gone` (2 jobs) whose lease ran out a minute ago, dispatch `alive`
    # (1 job) whose lease runs for another minute
    from crawlsched.actors.coordinator import send_report

    ids = _websites(rt, 3)
    now = rt.now()
    run_id = run_id_for("sweep-websites", now)
    rt.runs.open(run_id, "sweep-websites", now, now)
    gone, alive = uuid.uuid4().hex, uuid.uuid4().hex
    store = rt.jobs("websites")
    store.claim([ClaimRequest(gone, ids[:2])], run_id, now - timedelta(minutes=1))
    store.claim([ClaimRequest(alive, ids[2:])], run_id, now + timedelta(minutes=1))
    rt.runs.close_planning(run_id, 3, {}, now)

    # When the ticker reclaims expired holds, and its report reaches the coordinator
    reclaimed = reclaim_expired(rt, send_report)
    _drain(stub_broker, stub_worker)

    # Then exactly the two expired jobs count a failed attempt; the live one is untouched
    assert reclaimed == 2
    by_id = {d["_id"]: d for d in rt.db.websites.find({})}
    for job_id in ids[:2]:
        assert by_id[job_id]["state"] == int(JobState.FAILED)
        assert by_id[job_id]["last_outcome"] == Outcome.EXPIRED
        assert by_id[job_id]["attempt_count"] == 1
        assert "dispatch_id" not in by_id[job_id]
    assert by_id[ids[2]]["state"] == int(JobState.RUNNING)
    assert by_id[ids[2]]["dispatch_id"] == alive
    run = rt.runs.get(run_id)
    assert (run["state"], run["outstanding"], run["counts"]) == (RUNNING, 1, {"expired": 2})

    # And a late write from the dispatch that lost its jobs changes nothing
    late = [after_success(job_id, None, rt.now()) for job_id in ids[:2]]
    assert store.record(gone, late, rt.now()) == 0
    assert rt.db.websites.count_documents({"last_outcome": Outcome.EXPIRED}) == 2

    # And once the live dispatch reports, the run finishes with both outcomes counted
    store.record(alive, [after_success(ids[2], None, rt.now())], rt.now())
    from crawlsched.messages import ReportMessage

    send_report(
        ReportMessage(run_id=run_id, dispatch_id=alive, collection="websites", phase="crawl")
    )
    _drain(stub_broker, stub_worker)
    run = rt.runs.get(run_id)
    assert run["state"] == FINISHED
    assert run["counts"] == {"expired": 2, "succeeded": 1}


class PlannerCrash(Exception):
    pass


def test_planner_send_that_fails_gives_its_batches_back_at_once(rt, stub_broker, stub_worker):
    # Given 120 due website jobs: batches of 50, 50 and 20 (web's batch limit is 50)
    from crawlsched.actors.coordinator import send_report
    from crawlsched.messages import ReportMessage

    ids = _websites(rt, 120)
    fire_at = rt.now().replace(microsecond=0)
    sent: list = []

    def second_send_fails(message):
        if sent:
            raise PlannerCrash("RabbitMQ did not confirm the second batch")
        sent.append(message)

    # When the first batch leaves and the send of the second fails
    with pytest.raises(PlannerCrash):
        plan_run(rt, "sweep-websites", fire_at, second_send_fails)
    run_id = run_id_for("sweep-websites", fire_at)
    first = sent[0]
    first_ids = set(first.decoded_job_ids())

    # Then the first batch stays claimed, and every other job is pending again at once, in no
    # run and under no dispatch (not left to the dispatch lease), with no attempt counted
    store = rt.jobs("websites")
    running = {d["_id"] for d in rt.db.websites.find({"state": int(JobState.RUNNING)})}
    assert running == first_ids
    for doc in rt.db.websites.find({"_id": {"$nin": list(first_ids)}}):
        assert doc["state"] == int(JobState.PENDING)
        assert "dispatch_id" not in doc and "run_id" not in doc and "lease_deadline" not in doc
        assert doc.get("attempt_count", 0) == 0 and doc.get("last_outcome") is None

    # And the first batch is crawled and reported before the plan's retry comes
    done = [after_success(j, None, rt.now()) for j in first.decoded_job_ids()]
    store.record(first.dispatch_id, done, rt.now())
    send_report(
        ReportMessage(
            run_id=run_id, dispatch_id=first.dispatch_id, collection="websites", phase="crawl"
        )
    )
    _drain(stub_broker, stub_worker)
    run = rt.runs.get(run_id)
    assert run["state"] == PLANNING and run["planning"] is True
    assert run["counts"] == {"succeeded": len(first_ids)}

    # When the plan message is retried
    again: list = []
    closed = plan_run(rt, "sweep-websites", fire_at, again.append)

    # Then it dispatches the given-back jobs, none twice, and planning counts every job once
    rest_ids = [j for m in again for j in m.decoded_job_ids()]
    assert len(rest_ids) == len(set(rest_ids))
    assert first_ids.isdisjoint(rest_ids)
    assert first_ids | set(rest_ids) == set(ids)
    assert closed is not None and closed["planned"] == 120
    run = rt.runs.get(run_id)
    assert (run["state"], run["outstanding"]) == (RUNNING, 120 - len(first_ids))
    # And a third delivery plans nothing
    assert plan_run(rt, "sweep-websites", fire_at, again.append) is None

    # When the rest is crawled and reported
    for message in again:
        done = [after_success(j, None, rt.now()) for j in message.decoded_job_ids()]
        store.record(message.dispatch_id, done, rt.now())
        send_report(
            ReportMessage(
                run_id=run_id, dispatch_id=message.dispatch_id, collection="websites", phase="crawl"
            )
        )
    _drain(stub_broker, stub_worker)

    # Then the run finishes, every job counted exactly once, none expired
    run = rt.runs.get(run_id)
    assert run["state"] == FINISHED
    assert run["counts"] == {"succeeded": 120}
