"""The coordinator applies a report once and ends its run exactly once, with the right result,
event, webhook and parent count; a report that finished nothing, or names no run, is refused.

`record_report` and `finish_if_done` are called directly on a runtime over the embedded store
with a fixed clock. Jobs are written as a crawl leaves them (their last dispatch and outcome),
so each case starts from a known state without a worker.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import structlog

from crawlsched.catalog import JobState
from crawlsched.errors import ReportRejected
from crawlsched.flow.coordination import finish_if_done, record_report
from crawlsched.messages import ReportMessage
from crawlsched.planning.run_names import FINISHED, RUNNING, STOPPED
from crawlsched.runtime import Runtime
from tests.conftest import settings_for_tests

NOW = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
SCHEDULE = "sched-coord"
RUN = f"{SCHEDULE}@20261125T090000Z"
DISPATCH = "c" * 32
WEBHOOK = {"webhook": "https://hooks.example/crawl", "on": ["finished", "failed", "stopped"]}


@pytest.fixture
def rt(embedded_mongo_url):
    return Runtime(
        settings_for_tests(mongo_url=embedded_mongo_url, broker_url="stub://"), clock=lambda: NOW
    )


def _run(rt, run_id: str = RUN, planned: int = 2, **open_args) -> None:
    """A run whose planning closed over `planned` jobs (or `children` child runs)."""
    children = open_args.pop("children", None)
    rt.runs.open(run_id, SCHEDULE, NOW, NOW, **open_args)
    rt.runs.close_planning(run_id, planned, {}, NOW, children=children)


def _ended(rt, outcomes: list[str], run_id: str = RUN, dispatch: str = DISPATCH, **fields) -> None:
    """Jobs of `run_id` whose last outcome `dispatch` wrote (as a crawl leaves them)."""
    rt.db.profiles.insert_many(
        [
            {
                "_id": uuid.uuid4().hex,
                "run_id": run_id,
                "last_dispatch_id": dispatch,
                "last_outcome": outcome,
                "state": int(JobState.PENDING),
                **fields,
            }
            for outcome in outcomes
        ]
    )


def _children(rt, n: int, run_id: str = RUN, dispatch: str = DISPATCH) -> None:
    """`n` child jobs a page that ended in `dispatch` discovered for `run_id`, not yet released
    for planning (counted with their parent's end)."""
    parent = rt.db.profiles.find_one({"run_id": run_id, "last_dispatch_id": dispatch})
    rt.db.profiles.insert_many(
        [
            {
                "_id": f"child:{uuid.uuid4().hex}",
                "parent_job": parent["_id"],
                "scope_run": run_id,
                "released": False,
                "state": int(JobState.PENDING),
            }
            for _ in range(n)
        ]
    )


def _report(run_id: str = RUN, dispatch: str = DISPATCH, **extra) -> ReportMessage:
    return ReportMessage(
        run_id=run_id, dispatch_id=dispatch, collection="profiles", phase="crawl", **extra
    )


def _events(rt, run_id: str = RUN) -> list[dict]:
    return [
        {k: v for k, v in e.items() if k != "_id"}
        for e in rt.db.activity.find({"run_id": run_id}).sort("_id", 1)
    ]


class Calls:
    """Records what the coordinator asked for (webhook deliveries, children passes)."""

    def __init__(self) -> None:
        self.notified: list[str] = []
        self.passes: list[tuple[str, str]] = []

    def notify(self, delivery_id: str) -> None:
        self.notified.append(delivery_id)

    def plan_children(self, run_id: str, collection: str) -> None:
        self.passes.append((run_id, collection))


def test_coordinator_report_that_ends_its_run_finishes_it_once_with_its_event(rt):
    # Given a run of two jobs that one dispatch crawled (one succeeded, one exhausted), whose
    # results came with items and a cut
    _run(rt, planned=2)
    _ended(rt, ["succeeded"], last_discovered=3, last_items={"new": 2}, last_cut={"depth": 1})
    _ended(rt, ["exhausted"], last_items={"changed": 1})
    calls = Calls()

    # When its report arrives
    with structlog.testing.capture_logs() as logs:
        ended = record_report(rt, _report(stages_ms={"crawl": 12}), notify=calls.notify)

    # Then the run finished, succeeded, once, with what its jobs show
    assert ended is True
    run = rt.runs.get(RUN)
    assert (run["state"], run["result"], run["finished_at"], run["outstanding"]) == (
        FINISHED,
        "succeeded",
        NOW,
        0,
    )
    assert run["counts"] == {"succeeded": 1, "exhausted": 1}
    assert (run["links_discovered"], run["stages_ms"]) == (3, {"crawl": 12})
    assert _events(rt) == [
        {
            "event": "RunFinished",
            # A stable id: the same end written again (by the relay after a crash) is one event
            "event_id": f"{RUN}:RunFinished",
            "result": "succeeded",
            "given_up": [],
            "at": NOW,
            "run_id": RUN,
            "schedule_id": SCHEDULE,
            "parent_id": None,
            "planned": 2,
            "counts": {"succeeded": 1, "exhausted": 1},
            "discovered": 0,
            "items": {"new": 2, "changed": 1},
            "cut": {"depth": 1},
            # Kept for CRAWLSCHED_RETAIN_ACTIVITY_S (30 days) from when it was stored
            "expire_at": NOW + timedelta(days=30),
        }
    ]
    assert [e for e in logs if e["event"] == "run_ended"] == [
        {
            "event": "run_ended",
            "log_level": "info",
            "run_id": RUN,
            "result": "succeeded",
            "planned": 2,
        }
    ]
    # (its schedule asks for no webhook: nothing to send)
    assert calls.notified == []
    assert rt.db.webhook_deliveries.count_documents({}) == 0


def test_coordinator_redelivered_report_changes_nothing_and_says_it_was_a_duplicate(rt):
    # Given a run of three jobs, two of which one dispatch crawled and reported
    _run(rt, planned=3)
    _ended(rt, ["succeeded", "failed"])
    assert record_report(rt, _report()) is False
    before = rt.runs.get(RUN)
    assert (before["state"], before["outstanding"]) == (RUNNING, 1)

    # When the same report comes again
    with structlog.testing.capture_logs() as logs:
        again = record_report(rt, _report())

    # Then it is dropped as a duplicate: the run counts it once, and no event is written
    assert again is False
    after = rt.runs.get(RUN)
    assert (after["state"], after["outstanding"], after["counts"]) == (
        RUNNING,
        1,
        {"succeeded": 1, "failed": 1},
    )
    assert _events(rt) == []
    assert {
        "event": "report_ignored_duplicate",
        "log_level": "info",
        "report_key": f"{DISPATCH}:crawl",
    } in logs


def test_coordinator_run_ends_failed_when_jobs_ran_and_none_succeeded(rt):
    _run(rt, planned=2)
    _ended(rt, ["failed", "exhausted"])

    assert record_report(rt, _report()) is True

    run = rt.runs.get(RUN)
    assert (run["state"], run["result"]) == (FINISHED, "failed")
    assert [e["event"] for e in _events(rt)] == ["RunFailed"]


def test_coordinator_run_asked_to_stop_ends_stopped_whatever_its_counts(rt):
    _run(rt, planned=2)
    rt.runs.request_stop(RUN, NOW)
    _ended(rt, ["succeeded", "stopped"])

    assert record_report(rt, _report()) is True

    run = rt.runs.get(RUN)
    assert (run["state"], run["result"]) == (STOPPED, "stopped")
    assert [e["event"] for e in _events(rt)] == ["RunStopped"]


def test_coordinator_run_end_queues_the_webhook_its_schedule_asks_for(rt):
    # Given a schedule that asks to be told of its runs' ends
    rt.db.schedules.insert_one({"_id": SCHEDULE, "notify": WEBHOOK})
    _run(rt, planned=1)
    _ended(rt, ["succeeded"])
    calls = Calls()

    # When the run's last report ends it
    assert record_report(rt, _report(), notify=calls.notify) is True

    # Then one delivery is queued and sent by its id
    assert calls.notified == [f"{RUN}:RunFinished"]
    delivery = rt.db.webhook_deliveries.find_one({"_id": f"{RUN}:RunFinished"})
    assert (delivery["event"], delivery["run_id"]) == ("RunFinished", RUN)
    # with the URL sealed (this schedule held it in the clear, as an earlier version stored it)
    assert "url" not in delivery and WEBHOOK["webhook"] not in repr(delivery)
    assert rt.secrets.decrypt(delivery["secret"]) == WEBHOOK["webhook"]
    assert delivery["shown"] == "https://hooks.example"


def test_coordinator_report_that_ends_nothing_yet_sends_no_event(rt):
    # Given a run of three jobs of which one dispatch ended one
    _run(rt, planned=3)
    _ended(rt, ["succeeded"])

    # When its report arrives, the run is counted on but does not end
    assert record_report(rt, _report()) is False

    run = rt.runs.get(RUN)
    assert (run["state"], run["outstanding"], run["counts"]) == (RUNNING, 2, {"succeeded": 1})
    assert _events(rt) == []


def test_coordinator_refuses_a_report_of_a_dispatch_that_ended_no_job_of_its_run(rt):
    # Given a run, and a dispatch whose ended jobs belong to another run
    long_run = "s" * 150
    _run(rt, planned=1)
    _run(rt, run_id=long_run, planned=1)
    _ended(rt, ["succeeded"], run_id=RUN)

    # When it reports for the other run, it is refused, named by its first 100 characters
    with pytest.raises(ReportRejected) as refused:
        record_report(rt, _report(run_id=long_run))
    assert f"no job of run {'s' * 100!r} ended in that dispatch" in str(refused.value)
    assert refused.value.report_key == f"{DISPATCH}:crawl"
    # and neither run changed
    assert [rt.runs.get(r)["outstanding"] for r in (RUN, long_run)] == [1, 1]


def test_coordinator_refuses_a_report_for_a_run_that_does_not_exist(rt):
    # Given jobs a dispatch ended that name a run nobody opened, with children it found
    _ended(rt, ["succeeded"], run_id="ghost@20261125T090000Z")
    _children(rt, 2, run_id="ghost@20261125T090000Z")
    calls = Calls()

    # When its report arrives, it is refused and the children stay unreleased and unplanned
    with pytest.raises(ReportRejected) as refused:
        record_report(rt, _report(run_id="ghost@20261125T090000Z"), **vars_of(calls))
    assert refused.value.reason == "no such run"
    assert calls.passes == []
    assert rt.db.profiles.count_documents({"released": True}) == 0
    assert rt.db.runs.count_documents({}) == 0


def vars_of(calls: Calls) -> dict:
    return {"notify": calls.notify, "plan_children": calls.plan_children}


def test_coordinator_report_releases_the_dispatchs_children_and_asks_for_their_pass(rt):
    # Given a run of one job whose crawl discovered two children
    _run(rt, planned=1)
    _ended(rt, ["succeeded"])
    _children(rt, 2)
    calls = Calls()

    # When its report arrives
    assert record_report(rt, _report(), **vars_of(calls)) is False

    # Then the run waits for the children, released at the report and planned by one pass
    run = rt.runs.get(RUN)
    assert (run["state"], run["outstanding"], run["discovered"]) == (RUNNING, 2, 2)
    released = list(rt.db.profiles.find({"scope_run": RUN}))
    assert [(c["released"], c["released_at"]) for c in released] == [(True, NOW)] * 2
    assert calls.passes == [(RUN, "profiles")]

    # When the report is redelivered (a crash after the count), the release and the pass are
    # asked again (both idempotent), and nothing is counted twice
    assert record_report(rt, _report(), **vars_of(calls)) is False
    assert calls.passes == [(RUN, "profiles")] * 2
    assert rt.runs.get(RUN)["outstanding"] == 2


def test_coordinator_redelivered_report_releases_children_a_crash_left_unreleased(rt):
    # Given a report counted (its children with it), and a crash before they were released
    _run(rt, planned=1)
    _ended(rt, ["succeeded"])
    _children(rt, 1)
    report = _report()
    rt.runs.report(RUN, report.report_key, {"succeeded": 1}, discovered=1)
    calls = Calls()

    # When it is redelivered, the children are released and the pass asked for
    assert record_report(rt, report, **vars_of(calls)) is False
    assert rt.db.profiles.count_documents({"scope_run": RUN, "released": True}) == 1
    assert calls.passes == [(RUN, "profiles")]


def test_coordinator_report_without_children_asks_for_no_pass(rt):
    _run(rt, planned=2)
    _ended(rt, ["succeeded"])
    calls = Calls()

    assert record_report(rt, _report(), **vars_of(calls)) is False
    assert calls.passes == []


def test_coordinator_last_child_run_ends_its_parent_once_and_notifies_for_the_parent(rt):
    # Given a parent of two child runs, whose schedule asks for a webhook
    rt.db.schedules.insert_one({"_id": SCHEDULE, "notify": WEBHOOK})
    parent = RUN
    first, second = f"{parent}/1", f"{parent}/2"
    _run(rt, run_id=parent, planned=4, children=2)
    for child in (first, second):
        _run(rt, run_id=child, planned=2, parent_id=parent)
    first_dispatch, second_dispatch = "1" * 32, "2" * 32
    _ended(rt, ["succeeded", "failed"], run_id=first, dispatch=first_dispatch)
    _ended(rt, ["exhausted", "exhausted"], run_id=second, dispatch=second_dispatch)
    calls = Calls()

    # When the first child ends, the parent counts it but goes on
    assert record_report(rt, _report(first, first_dispatch), notify=calls.notify) is True
    run = rt.runs.get(parent)
    assert (run["state"], run["outstanding"], run["counts"]) == (
        RUNNING,
        1,
        {"succeeded": 1, "failed": 1},
    )

    # When the second child ends, the parent ends too, with every child's counts
    assert record_report(rt, _report(second, second_dispatch), notify=calls.notify) is True
    run = rt.runs.get(parent)
    assert (run["state"], run["result"], run["outstanding"]) == (FINISHED, "succeeded", 0)
    assert run["counts"] == {"succeeded": 1, "failed": 1, "exhausted": 2}
    # Then each child ended failed or finished by itself, and the parent's webhook went out
    # once: the children do not notify
    assert rt.runs.get(second)["result"] == "failed"
    assert [(e["event"], e["parent_id"]) for e in _events(rt, second)] == [("RunFailed", parent)]
    assert [e["event"] for e in _events(rt, parent)] == ["RunFinished"]
    assert calls.notified == [f"{parent}:RunFinished"]

    # And a redelivered child report counts nothing twice
    assert record_report(rt, _report(second, second_dispatch), notify=calls.notify) is False
    assert rt.runs.get(parent)["counts"] == {"succeeded": 1, "failed": 1, "exhausted": 2}
    assert calls.notified == [f"{parent}:RunFinished"]


def test_coordinator_finish_if_done_ends_a_run_once_and_only_when_done(rt):
    # Given a run still waiting for a job
    _run(rt, planned=1)
    assert finish_if_done(rt, rt.runs.get(RUN)) is False
    assert rt.runs.get(RUN)["state"] == RUNNING

    # When nothing was planned, it is done at once: it ends, and only the first call ends it
    _run(rt, run_id=f"{SCHEDULE}@empty", planned=0)
    empty = rt.runs.get(f"{SCHEDULE}@empty")
    assert finish_if_done(rt, empty) is True
    assert finish_if_done(rt, empty) is False
    events = _events(rt, f"{SCHEDULE}@empty")
    assert [(e["event"], e["counts"], e["discovered"], e["items"], e["cut"]) for e in events] == [
        ("RunFinished", {}, 0, {}, {})
    ]


def test_coordinator_run_end_forgets_the_runs_waiting_batches(rt):
    # Given an ended run's waiting batch left behind (its jobs' lease ran out while it waited,
    # and they were crawled by another try), and another run's
    _run(rt, run_id=f"{SCHEDULE}@done", planned=0)
    for batch, run_id in (("left", f"{SCHEDULE}@done"), ("live", RUN)):
        rt.waiting.park({"_id": batch, "run_id": run_id, "needs": ["host:x"], "jobs": 1})

    # When the run ends, its waiting batch goes with it; the other run's stays
    assert finish_if_done(rt, rt.runs.get(f"{SCHEDULE}@done")) is True
    assert [w["_id"] for w in rt.waiting.all()] == ["live"]


def test_coordinator_without_a_notifier_or_a_planner_logs_what_it_did_not_send(rt):
    # Given a run whose schedule asks for a webhook: its one job found a child, which a second
    # dispatch crawled
    rt.db.schedules.insert_one({"_id": SCHEDULE, "notify": WEBHOOK})
    _run(rt, planned=1)
    _ended(rt, ["succeeded"])
    _children(rt, 1)
    _ended(rt, ["succeeded"], dispatch="e" * 32)

    # When its reports come to a coordinator given neither a notifier nor a children planner
    with structlog.testing.capture_logs() as logs:
        assert record_report(rt, _report()) is False
        assert record_report(rt, _report(dispatch="e" * 32)) is True

    # Then the run ended counting the child its first job found
    assert [(e["event"], e["discovered"]) for e in _events(rt)] == [("RunFinished", 1)]
    # and each thing the coordinator could not send is logged, naming what it was
    not_sent = ("children_pass_not_sent", "webhook_not_sent_no_notifier")
    assert [e for e in logs if e["event"] in not_sent] == [
        {
            "event": "children_pass_not_sent",
            "log_level": "info",
            "run_id": RUN,
            "collection": "profiles",
        },
        {
            "event": "webhook_not_sent_no_notifier",
            "log_level": "info",
            "delivery_id": f"{RUN}:RunFinished",
        },
    ]


def test_coordinator_redelivered_report_of_a_running_child_does_not_count_it_off_its_parent(rt):
    # Given a parent of one child run of two jobs, each crawled by its own dispatch, and a
    # schedule that asks for a webhook
    rt.db.schedules.insert_one({"_id": SCHEDULE, "notify": WEBHOOK})
    child = f"{RUN}/1"
    _run(rt, planned=2, children=1)
    _run(rt, run_id=child, planned=2, parent_id=RUN)
    first, second = "1" * 32, "2" * 32
    _ended(rt, ["succeeded"], run_id=child, dispatch=first)
    _ended(rt, ["succeeded"], run_id=child, dispatch=second)
    calls = Calls()

    # When the first dispatch's report comes twice while the child still runs
    assert record_report(rt, _report(child, first), notify=calls.notify) is False
    assert record_report(rt, _report(child, first), notify=calls.notify) is False

    # Then the parent still waits for its child
    run = rt.runs.get(RUN)
    assert (run["state"], run["outstanding"], run["counts"]) == (RUNNING, 1, {})

    # When the second report ended the child and the process died before the parent's count,
    # its redelivery counts the child, ends the parent and sends the parent's webhook
    late = _report(child, second)
    rt.runs.report(child, late.report_key, {"succeeded": 1})
    assert rt.runs.finish(child, NOW)
    assert record_report(rt, late, notify=calls.notify) is False
    run = rt.runs.get(RUN)
    assert (run["state"], run["counts"]) == (FINISHED, {"succeeded": 2})
    assert calls.notified == [f"{RUN}:RunFinished"]


def test_coordinator_run_end_drops_children_a_late_copy_registered_and_nobody_counted(rt):
    # Given a run of one job, and a child page a late copy of a batch registered under a page
    # another dispatch had already ended (so no report will ever count it in)
    _run(rt, planned=1)
    _ended(rt, ["succeeded"])
    late = {"_id": "child:late", "parent_job": "elsewhere", "scope_run": RUN,
            "released": False, "state": int(JobState.PENDING)}  # fmt: skip
    rt.db.profiles.insert_one(late)
    # When the run's last report ends it
    with structlog.testing.capture_logs() as logs:
        assert record_report(rt, _report()) is True
    # Then that child is gone, not left showing as a page still to crawl, and it is said
    assert rt.db.profiles.find_one({"_id": "child:late"}) is None
    assert rt.db.profiles.count_documents({"scope_run": RUN, "released": False}) == 0
    dropped = [e for e in logs if e["event"] == "uncounted_children_dropped"]
    assert [(e["run_id"], e["jobs"]) for e in dropped] == [(RUN, 1)]
    # (the run's own job stays, to expire with the run)
    assert rt.db.profiles.count_documents({"run_id": RUN}) == 1
