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
from crawlsched.ids import encode_id
from crawlsched.planning.outcomes import REDO, Outcome, RedoPolicy, after_success
from crawlsched.planning.run_names import FINISHED, PLANNING, RUNNING, run_id_for
from crawlsched.runtime import get_runtime
from crawlsched.store.job_claims import ClaimRequest


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


def _two_dispatches(rt):
    """One run: dispatch `gone` (2 jobs) whose lease ran out a minute ago, dispatch `alive`
    (1 job) whose lease runs for another minute."""
    ids = _websites(rt, 3)
    now = rt.now()
    run_id = run_id_for("sweep-websites", now)
    rt.runs.open(run_id, "sweep-websites", now, now)
    gone, alive = uuid.uuid4().hex, uuid.uuid4().hex
    store = rt.jobs("websites")
    store.claim([ClaimRequest(gone, ids[:2])], run_id, now - timedelta(minutes=1))
    store.claim([ClaimRequest(alive, ids[2:])], run_id, now + timedelta(minutes=1))
    rt.runs.close_planning(run_id, 3, {}, now)
    return ids, run_id, gone, alive


def _crawl_and_report(rt, run_id, dispatch_id, job_ids):
    from crawlsched.actors.sends import send_report
    from crawlsched.messages import ReportMessage

    done = [after_success(job_id, None, rt.now()) for job_id in job_ids]
    rt.jobs("websites").record(dispatch_id, done, rt.now())
    send_report(
        ReportMessage(run_id=run_id, dispatch_id=dispatch_id, collection="websites", phase="crawl")
    )


def test_a_reclaimed_dispatch_gives_its_jobs_back_to_the_run_and_the_run_crawls_them_again(
    rt, stub_broker, stub_worker
):
    from crawlsched.actors.sends import send_report
    from crawlsched.flow.children import plan_discovered

    ids, run_id, gone, alive = _two_dispatches(rt)

    # When the ticker reclaims expired holds
    assert reclaim_expired(rt, send_report) == 2
    _drain(stub_broker, stub_worker)

    # Then exactly the two expired jobs go back to their run to be crawled again after a
    # backoff: pending, no attempt counted (not the page's fault), nothing counted off the run
    by_id = {d["_id"]: d for d in rt.db.websites.find({})}
    for job_id in ids[:2]:
        doc = by_id[job_id]
        assert (doc["state"], doc["last_outcome"]) == (int(JobState.PENDING), REDO)
        assert (doc["redo_run"], doc["redo_tries"], doc["attempt_count"]) == (run_id, 1, 0)
        assert doc["execution_date"] > rt.now()
        assert "dispatch_id" not in doc
    assert by_id[ids[2]]["state"] == int(JobState.RUNNING)
    assert by_id[ids[2]]["dispatch_id"] == alive
    run = rt.runs.get(run_id)
    assert (run["state"], run["outstanding"], run["counts"]) == (RUNNING, 3, {})
    # And each reclaimed try has its history row
    rows = rt.history.for_run(run_id)
    assert sorted((r["job_id"], r["outcome"], r["retried"]) for r in rows) == sorted(
        (encode_id(j), "expired", True) for j in ids[:2]
    )

    # And a late write from the dispatch that lost its jobs changes nothing
    late = [after_success(job_id, None, rt.now()) for job_id in ids[:2]]
    assert rt.jobs("websites").record(gone, late, rt.now()) == 0

    # And no sweep of another run may take them: they belong to this run
    assert rt.jobs("websites").due_tasks(rt.now() + timedelta(hours=1)) == []

    # When their backoff has passed, the ticker's sweep asks for the run's pass
    from crawlsched.flow.children import sweep_waiting_children

    rt.db.websites.update_many({"redo_run": run_id}, {"$set": {"execution_date": rt.now()}})
    asked: list = []
    assert sweep_waiting_children(rt, lambda r, c: asked.append((r, c))) == 1
    assert asked == [(run_id, "websites")]
    sent: list = []
    assert plan_discovered(rt, run_id, "websites", sent.append) == 2
    (again,) = sent
    assert sorted(again.decoded_job_ids()) == sorted(ids[:2])

    # And once both dispatches report, the run finishes succeeded with every job counted once
    _crawl_and_report(rt, run_id, alive, ids[2:])
    _crawl_and_report(rt, run_id, again.dispatch_id, ids[:2])
    _drain(stub_broker, stub_worker)
    run = rt.runs.get(run_id)
    assert (run["state"], run["result"], run["counts"]) == (FINISHED, "succeeded", {"succeeded": 3})
    # And the retried jobs no longer wait in the run
    assert rt.db.websites.count_documents({"redo_run": {"$ne": None}}) == 0


def test_a_job_the_machinery_fails_on_every_try_is_given_up_and_the_run_ends_incomplete(
    rt, stub_broker, stub_worker
):
    from crawlsched.actors.sends import send_report

    # Given a run that allows one try per page
    rt.__dict__["redo_policy"] = RedoPolicy(tries_per_run=1)
    ids, run_id, _gone, alive = _two_dispatches(rt)

    # When the expired dispatch is reclaimed and the live one reports
    assert reclaim_expired(rt, send_report) == 2
    _crawl_and_report(rt, run_id, alive, ids[2:])
    _drain(stub_broker, stub_worker)

    # Then the two jobs are given up with the reason, their page's attempts untouched, and the
    # run ends incomplete, naming them in its end event
    for doc in rt.db.websites.find({"_id": {"$in": ids[:2]}}):
        assert (doc["state"], doc["last_outcome"]) == (int(JobState.FAILED), Outcome.EXPIRED)
        assert "dispatch lease expired" in doc["last_error"]
        assert doc["attempt_count"] == 0 and not doc.get("exhausted")
    run = rt.runs.get(run_id)
    assert (run["state"], run["result"]) == (FINISHED, "incomplete")
    assert run["counts"] == {"expired": 2, "succeeded": 1}
    (event,) = rt.db.activity.find({"event": "RunIncomplete", "run_id": run_id})
    assert event["event_id"] == f"{run_id}:RunIncomplete"
    assert sorted(row["url"] for row in event["given_up"]) == sorted(
        f"http://127.0.0.1:9/page{i}" for i in range(2)
    )
    assert all("dispatch lease expired" in row["reason"] for row in event["given_up"])
    # And the next firing plans them as usual
    assert rt.jobs("websites").due_tasks(rt.now()) == ["article"]


class PlannerCrash(Exception):
    pass


def test_planner_send_that_fails_gives_its_batches_back_at_once(rt, stub_broker, stub_worker):
    # Given 120 due website jobs: batches of 50, 50 and 20 (web's batch limit is 50)
    from crawlsched.actors.sends import send_report
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


def test_a_run_counts_machinery_tries_per_job_and_gives_up_after_the_last(
    rt, stub_broker, stub_worker
):
    from crawlsched.actors.sends import send_report
    from crawlsched.flow.children import plan_discovered

    # Given a run that allows two tries per page, and a dispatch whose worker died
    rt.__dict__["redo_policy"] = RedoPolicy(tries_per_run=2)
    ids, run_id, _gone, alive = _two_dispatches(rt)
    assert reclaim_expired(rt, send_report) == 2  # first try lost: back to the run

    # When the run tries them again and that worker dies too
    rt.db.websites.update_many({"redo_run": run_id}, {"$set": {"execution_date": rt.now()}})
    sent: list = []
    plan_discovered(rt, run_id, "websites", sent.append)
    (again,) = sent
    rt.jobs("websites").extend_lease(again.dispatch_id, rt.now() - timedelta(seconds=1))
    assert reclaim_expired(rt, send_report) == 2

    # Then their second try was their last: given up, and the run ends incomplete
    _crawl_and_report(rt, run_id, alive, ids[2:])
    _drain(stub_broker, stub_worker)
    outcomes = {d["last_outcome"] for d in rt.db.websites.find({"_id": {"$in": ids[:2]}})}
    assert outcomes == {Outcome.EXPIRED}
    run = rt.runs.get(run_id)
    assert (run["result"], run["counts"]) == ("incomplete", {"expired": 2, "succeeded": 1})
    history = [r for r in rt.history.for_run(run_id) if r["outcome"] == "expired"]
    assert sorted(r["retried"] for r in history) == [False, False, True, True]


def test_a_planner_that_dies_mid_pass_leaves_claims_taken_back_within_a_minute(
    rt, stub_broker, stub_worker, monkeypatch
):
    # Given 120 due website jobs (batches of 50, 50 and 20) and a planner process that dies
    # (kill -9) as it sends the second batch: nothing after the first send reaches the store
    from crawlsched.actors.sends import send_report
    from crawlsched.flow.planning import UNSENT_LEASE_S
    from crawlsched.store.jobs import MongoJobStore

    _websites(rt, 120)
    fire_at = rt.now().replace(microsecond=0)
    sent: list = []

    def dies_on_second_send(message):
        if sent:
            monkeypatch.setattr(MongoJobStore, "give_back_unsent", _dead)
            monkeypatch.setattr(MongoJobStore, "confirm_sent", _dead)
            raise PlannerCrash("killed")
        sent.append(message)

    with pytest.raises(PlannerCrash):
        plan_run(rt, "sweep-websites", fire_at, dies_on_second_send)
    monkeypatch.undo()
    claimed = [d for d in rt.db.websites.find({"state": int(JobState.RUNNING)})]
    assert len(claimed) == 120  # every batch of the chunk was claimed before the first send

    # When the ticker looks just before the short claim runs out: nothing is taken back yet
    start = rt.now()
    monkeypatch.setattr(rt, "now", lambda: start + timedelta(seconds=UNSENT_LEASE_S - 1))
    assert reclaim_expired(rt, send_report) == 0
    # When it looks a minute after the death
    monkeypatch.setattr(rt, "now", lambda: start + timedelta(seconds=UNSENT_LEASE_S + 1))
    # Then every claim of the dead pass is taken back (not after the 900 s dispatch lease):
    # the jobs go back to their run for another try, none lost
    assert reclaim_expired(rt, send_report) == 120
    assert rt.db.websites.count_documents({"state": int(JobState.RUNNING)}) == 0
    for doc in rt.db.websites.find({}):
        assert doc["state"] == int(JobState.PENDING) and doc["last_outcome"] == REDO
    assert rt.settings.dispatch_lease_s > 10 * UNSENT_LEASE_S


def test_a_planner_pass_that_sends_everything_gives_its_batches_the_whole_lease(
    rt, stub_broker, stub_worker, monkeypatch
):
    # Given 120 due website jobs, all sent
    from crawlsched.actors.sends import send_report
    from crawlsched.flow.planning import UNSENT_LEASE_S

    _websites(rt, 120)
    fire_at = rt.now().replace(microsecond=0)
    sent: list = []
    plan_run(rt, "sweep-websites", fire_at, sent.append)
    assert sum(len(m.decoded_job_ids()) for m in sent) == 120

    # When the ticker looks well after the short claim would have run out
    start = rt.now()
    monkeypatch.setattr(rt, "now", lambda: start + timedelta(seconds=10 * UNSENT_LEASE_S))
    # Then nothing is taken back: each job holds the whole dispatch lease
    assert reclaim_expired(rt, send_report) == 0
    lease = timedelta(seconds=rt.settings.dispatch_lease_s)
    for doc in rt.db.websites.find({}):
        assert doc["state"] == int(JobState.RUNNING)
        assert doc["lease_deadline"] >= start + lease - timedelta(seconds=5)


def _dead(*args, **kwargs):
    raise PlannerCrash("the process is gone")
