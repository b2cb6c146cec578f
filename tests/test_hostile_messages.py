"""Hostile messages on the stub broker: each is dead-lettered with its reason logged at WARNING,
the run's counts and state are untouched, and the worker goes on to process a genuine report.

Real actors and middleware, the embedded store, worker threads. The run is built through the
stores (planning closed over jobs claimed by two dispatches), so every case starts from the
same known state.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import dramatiq
import pytest
import structlog

from crawlsched.catalog import JobState
from crawlsched.messages import ReportMessage
from crawlsched.planning.outcomes import after_success
from crawlsched.planning.run_names import FINISHED, RUNNING
from crawlsched.runtime import get_runtime
from crawlsched.store.job_claims import ClaimRequest

RUN, OTHER_RUN = "sched-a@20240601T120000Z", "sched-b@20240601T120000Z"


def _jobs(rt, n: int, prefix: str) -> list:
    now = rt.now()
    docs = [
        {
            "target": f"{prefix}{i}",
            "media_name_id": 1,
            "task": "profile",
            "state": int(JobState.PENDING),
            "execution_date": now - timedelta(seconds=1),
        }
        for i in range(n)
    ]
    rt.jobs("profiles").insert_new(docs)
    return [d["_id"] for d in rt.db.profiles.find({"target": {"$regex": f"^{prefix}"}})]


def _planned_run(rt, run_id: str, job_ids: list) -> str:
    """A run whose planning closed over `job_ids`, all claimed by one dispatch: its id."""
    now = rt.now()
    dispatch = uuid.uuid4().hex
    rt.runs.open(run_id, run_id.split("@", maxsplit=1)[0], now, now)
    rt.jobs("profiles").claim([ClaimRequest(dispatch, job_ids)], run_id, now + timedelta(hours=1))
    rt.runs.close_planning(run_id, len(job_ids), {}, now)
    return dispatch


def _finish_jobs(rt, dispatch: str, job_ids: list) -> None:
    updates = [after_success(j, None, rt.now(), discovered=2) for j in job_ids]
    rt.jobs("profiles").record(dispatch, updates, rt.now())


def _report(run_id: str, dispatch: str, **extra) -> dict:
    payload = ReportMessage(
        run_id=run_id, dispatch_id=dispatch, collection="profiles", phase="crawl"
    ).payload()
    return {**payload, **extra}


def _crawl_payload(dispatch: str, job_ids: list[str]) -> dict:
    return {
        "run_id": RUN,
        "dispatch_id": dispatch,
        "collection": "profiles",
        "task": "profile",
        "category": "without_selenium_and_login",
        "media_name": "twitter",
        "media_id": 1,
        "driver_class": "website",
        "need_login": False,
        "need_selenium": False,
        "crawl_limit": 10,
        "job_ids": job_ids,
    }


def _deliver(broker, worker, send) -> list[dict]:
    """Send, wait for the queues to drain, and return the log events emitted meanwhile."""
    with structlog.testing.capture_logs() as logs:
        send()
        for queue in ("crawlsched.done", "crawlsched.plan", "crawlsched.crawl.profile"):
            broker.join(queue, fail_fast=False)
        worker.join()
    return logs


def _dead_letter_reasons(logs: list[dict]) -> list[str]:
    return [
        e["reason"]
        for e in logs
        if e["event"] == "message_dead_lettered" and e["log_level"] == "warning"
    ]


def _run_state(rt, run_id: str) -> tuple:
    run = rt.runs.get(run_id)
    return run["state"], run["outstanding"], run["counts"], run.get("stages_ms", {})


@pytest.fixture
def world(stub_broker, stub_worker):
    """Run RUN: 3 jobs claimed by dispatch `live` (still crawling). Run OTHER_RUN: 2 jobs by
    dispatch `foreign`, already crawled and recorded."""
    rt = get_runtime()
    rt.create_indexes()
    live = _planned_run(rt, RUN, _jobs(rt, 3, "a"))
    foreign_jobs = _jobs(rt, 2, "b")
    foreign = _planned_run(rt, OTHER_RUN, foreign_jobs)
    _finish_jobs(rt, foreign, foreign_jobs)
    return rt, stub_broker, stub_worker, live, foreign


def _record_finished():
    from crawlsched.actors.coordinator import record_finished

    return record_finished


HOSTILE_REPORTS = {
    # the report that finished a live run with outstanding -979, in the old message shape
    "counts_in_message": lambda live, foreign: {
        "run_id": RUN,
        "report_key": "forged:1",
        "counts": {"succeeded": 1000},
    },
    "discovered_million": lambda live, foreign: _report(RUN, live, discovered=1_000_000),
    "dollar_stage_key": lambda live, foreign: _report(RUN, live, stages_ms={"$bad": 1}),
    "dotted_stage_key": lambda live, foreign: _report(RUN, live, stages_ms={"a.b": 1}),
    "huge_stage_time": lambda live, foreign: _report(RUN, live, stages_ms={"x": 1e308}),
    "too_many_stages": lambda live, foreign: _report(
        RUN, live, stages_ms={f"s{chr(97 + i)}": 1 for i in range(20)}
    ),
    "unknown_phase": lambda live, foreign: _report(RUN, live, phase="succeeded"),
    "unknown_collection": lambda live, foreign: _report(RUN, live, collection="users"),
    "dispatch_not_an_id": lambda live, foreign: _report(RUN, live, dispatch_id="x" * 100_000),
    # well-formed, but the store does not bear them out
    "forged_dispatch": lambda live, foreign: _report(RUN, uuid.uuid4().hex),
    "foreign_dispatch": lambda live, foreign: _report(RUN, foreign),
    "early_report_of_live_dispatch": lambda live, foreign: _report(RUN, live),
    "unknown_run": lambda live, foreign: _report("nope@20240601T120000Z", foreign),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_REPORTS))
def test_hostile_report_is_dead_lettered_and_changes_nothing(world, case):
    rt, broker, worker, live, foreign = world
    before = _run_state(rt, RUN), _run_state(rt, OTHER_RUN)
    payload = HOSTILE_REPORTS[case](live, foreign)

    logs = _deliver(broker, worker, lambda: _record_finished().send(payload))

    assert (_run_state(rt, RUN), _run_state(rt, OTHER_RUN)) == before
    assert len(broker.dead_letters) == 1
    reasons = _dead_letter_reasons(logs)
    assert len(reasons) == 1 and reasons[0], logs
    assert all(len(str(v)) < 3_000 for e in logs for v in e.values())
    # And the worker lives: the genuine report of the foreign run still finishes it.
    _deliver(broker, worker, lambda: _record_finished().send(_report(OTHER_RUN, foreign)))
    assert rt.runs.get(OTHER_RUN)["state"] == FINISHED


def test_genuine_report_counts_from_the_jobs_once(world):
    rt, broker, worker, live, _foreign = world
    job_ids = [d["_id"] for d in rt.db.profiles.find({"dispatch_id": live})]
    _finish_jobs(rt, live, job_ids)

    _deliver(broker, worker, lambda: _record_finished().send(_report(RUN, live)))
    logs = _deliver(broker, worker, lambda: _record_finished().send(_report(RUN, live)))

    run = rt.runs.get(RUN)
    assert run["state"] == FINISHED
    assert run["outstanding"] == 0
    assert run["counts"] == {"succeeded": 3}
    assert run["links_discovered"] == 6  # 2 links per job, read from the jobs
    assert not broker.dead_letters
    assert [e["event"] for e in logs] == ["report_ignored_duplicate"]


def test_genuine_report_of_part_of_a_run_does_not_finish_it(world):
    rt, broker, worker, live, _foreign = world
    job_ids = [d["_id"] for d in rt.db.profiles.find({"dispatch_id": live})]
    _finish_jobs(rt, live, job_ids[:2])
    second = uuid.uuid4().hex
    rt.jobs("profiles").reassign(live, second, job_ids[2:])

    _deliver(broker, worker, lambda: _record_finished().send(_report(RUN, live)))

    state, outstanding, counts, _ = _run_state(rt, RUN)
    assert (state, outstanding, counts) == (RUNNING, 1, {"succeeded": 2})


def test_crawl_message_with_200k_job_ids_is_dead_lettered(world):
    rt, broker, worker, live, _foreign = world
    from crawlsched.actors.crawl import CRAWL_ACTORS

    payload = _crawl_payload(live, [f"oid:{i:024x}" for i in range(200_000)])
    logs = _deliver(broker, worker, lambda: CRAWL_ACTORS["profile"].send(payload))

    reasons = _dead_letter_reasons(logs)
    assert len(reasons) == 1 and "bytes exceeds" in reasons[0]
    assert len(broker.dead_letters) == 1
    assert rt.db.profiles.count_documents({"dispatch_id": live}) == 3  # untouched


def test_crawl_message_over_the_batch_limit_is_dead_lettered(world):
    rt, broker, worker, live, _foreign = world
    from crawlsched.actors.crawl import CRAWL_ACTORS
    from crawlsched.catalog import MAX_BATCH_JOBS

    payload = _crawl_payload(live, ["1"] * (MAX_BATCH_JOBS + 1))
    logs = _deliver(broker, worker, lambda: CRAWL_ACTORS["profile"].send(payload))

    reasons = _dead_letter_reasons(logs)
    assert len(reasons) == 1 and "job_ids" in reasons[0], reasons
    assert rt.db.profiles.count_documents({"dispatch_id": live}) == 3


@pytest.mark.parametrize("timestamp", ["yesterday", None, 1.5, [1], True])
def test_malformed_message_timestamp_is_dead_lettered_before_age_limit(world, timestamp):
    rt, broker, worker, _live, foreign = world
    actor = _record_finished()
    genuine = actor.message(_report(OTHER_RUN, foreign))
    message = dramatiq.Message(
        queue_name=genuine.queue_name,
        actor_name=genuine.actor_name,
        args=genuine.args,
        kwargs={},
        options={},
        message_id=genuine.message_id,
        message_timestamp=timestamp,
    )
    logs = _deliver(broker, worker, lambda: broker.enqueue(message))

    reasons = _dead_letter_reasons(logs)
    assert len(reasons) == 1 and "message_timestamp" in reasons[0]
    assert rt.runs.get(OTHER_RUN)["state"] == RUNNING  # not processed anyway


def test_plan_message_with_wrong_arguments_is_dead_lettered_not_retried(world):
    _rt, broker, worker, _live, _foreign = world
    from crawlsched.actors.planner import plan_crawls

    logs = _deliver(broker, worker, lambda: plan_crawls.send("s", "2024-01-01T00:00:00Z", "x"))
    logs += _deliver(broker, worker, lambda: plan_crawls.send("s" * 10_000, "2024"))
    logs += _deliver(broker, worker, lambda: plan_crawls.send("s", "not a date" * 1000))

    reasons = _dead_letter_reasons(logs)
    assert len(reasons) == 3, logs
    assert len(broker.dead_letters) == 3
    assert all(len(r) <= 500 for r in reasons)


def test_with_a_signing_key_unsigned_and_tampered_messages_are_dead_lettered(stub_pipeline):
    broker, worker = stub_pipeline(message_signing_key="k" * 32)
    actor = _record_finished()
    payload = _report(RUN, uuid.uuid4().hex)
    unsigned = actor.message(payload)
    signed = actor.message(payload)
    broker.emit_before("enqueue", signed, None)  # what send() does: signs it
    tampered = signed.copy(args=(_report(OTHER_RUN, uuid.uuid4().hex),))

    def put_raw():
        for message in (unsigned, tampered):
            broker.queues[message.queue_name].put(message.encode())
        actor.send(payload)  # signed on the way out, then refused by the coordinator

    logs = _deliver(broker, worker, put_raw)

    reasons = _dead_letter_reasons(logs)
    assert sorted(r.startswith("missing or bad signature") for r in reasons) == [False, True, True]
    assert any("ReportRejected" in r for r in reasons)
