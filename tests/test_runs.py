"""MongoRunStore: reports applied once, discovered children counted first, finish exactly once."""

import threading
from datetime import timedelta

import pytest

from crawlsched.planning.run_names import FINISHED, RUNNING, is_done, run_id_for
from crawlsched.store.runs import MongoRunStore
from tests.support.factories import NOW, STORE_BACKENDS, open_store

FIRE_AT = NOW - timedelta(minutes=1)


@pytest.fixture(params=STORE_BACKENDS)
def store(request):
    yield from open_store(request)


@pytest.fixture
def runs(store):
    return MongoRunStore(store.db)


def opened(runs, planned):
    run_id = run_id_for("sched-1", FIRE_AT)
    runs.open(run_id, "sched-1", FIRE_AT, NOW)
    runs.close_planning(run_id, planned, {"claimed": planned}, NOW)
    return run_id


def test_runs_report_is_applied_once_per_key(runs):
    run_id = opened(runs, planned=3)

    first = runs.report(run_id, "d1:crawl", {"succeeded": 1, "failed": 1}, stages_ms={"crawl": 5})
    again = runs.report(run_id, "d1:crawl", {"succeeded": 1, "failed": 1}, stages_ms={"crawl": 5})

    assert first is not None
    assert again is None
    run = runs.get(run_id)
    assert run["outstanding"] == 1
    assert run["counts"] == {"succeeded": 1, "failed": 1}
    assert run["stages_ms"] == {"crawl": 5}
    assert "reports" not in run
    assert runs.report("no-such-run", "d1:crawl", {"succeeded": 1}) is None


def test_a_report_of_a_key_that_finds_more_ended_counts_only_the_difference(runs):
    # Given a run of 5 pages whose dispatch d1 reported 1 succeeded page with 2 children
    run_id = opened(runs, planned=5)
    assert runs.report(run_id, "d1:crawl", {"succeeded": 1}, discovered=2, links=4) is not None

    # When a copy of that batch ended 2 more pages under d1 after that count (one given up, one
    # succeeded with one child), and its report of the same key comes
    late = runs.report(run_id, "d1:crawl", {"succeeded": 2, "given_up": 1}, discovered=3, links=5)

    # Then just the difference is counted: 2 more pages off, 1 more child in
    assert late is not None
    run = runs.get(run_id)
    assert run["counts"] == {"succeeded": 2, "given_up": 1}
    assert run["discovered"] == 3 and run["outstanding"] == 5 + 3 - 3
    # And the same report again, or an older one that saw less, counts nothing
    assert runs.report(run_id, "d1:crawl", {"succeeded": 2, "given_up": 1}, discovered=3) is None
    assert runs.report(run_id, "d1:crawl", {"succeeded": 1}, discovered=2) is None
    assert runs.get(run_id)["counts"] == {"succeeded": 2, "given_up": 1}
    # (links are the first report's: what a count needs is pages and children)
    assert run["links_discovered"] == 4


def test_reports_of_one_key_racing_count_each_ended_page_once(runs):
    # Given a run of 40 pages, all ended under one dispatch, seen by 8 copies of its report
    # that each read the store at a different moment (1, 6, 11, ... of the 40 ended)
    run_id = opened(runs, planned=40)
    seen = [{"succeeded": n} for n in range(1, 41, 5)] + [{"succeeded": 40}]
    barrier = threading.Barrier(len(seen))

    def report(counts):
        barrier.wait()
        runs.report(run_id, "d1:crawl", counts)

    threads = [threading.Thread(target=report, args=(counts,)) for counts in seen]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then each page was counted off once, whatever order they came in
    run = runs.get(run_id)
    assert run["counts"] == {"succeeded": 40} and run["outstanding"] == 0


def test_runs_open_and_close_planning_are_idempotent(runs):
    run_id = opened(runs, planned=2)
    assert runs.open(run_id, "sched-1", FIRE_AT, NOW + timedelta(hours=1))["created_at"] == NOW
    assert runs.close_planning(run_id, 2, {}, NOW) is None
    assert runs.get(run_id)["outstanding"] == 2


def test_runs_discovered_children_keep_the_run_outstanding_until_reported(runs):
    # Given a run of one job, whose crawl discovers two children as it finishes
    run_id = opened(runs, planned=1)
    parent = runs.report(run_id, "parent", {"succeeded": 1}, discovered=2)

    # Then the run is not done, and cannot finish, while the children are out
    assert parent["outstanding"] == 2
    assert not is_done(parent)
    assert not runs.finish(run_id, NOW)

    # When the first child reports a final failure and discovers one more
    child = runs.report(run_id, "child-1", {"exhausted": 1}, discovered=1)
    assert child["outstanding"] == 2
    assert not runs.finish(run_id, NOW)

    # Then only the last report brings it to zero, and the run finishes
    assert runs.report(run_id, "child-2", {"succeeded": 1})["outstanding"] == 1
    last = runs.report(run_id, "grandchild", {"succeeded": 1})
    assert last["outstanding"] == 0
    assert is_done(last)
    assert last["discovered"] == 3
    assert last["counts"] == {"succeeded": 3, "exhausted": 1}
    assert runs.finish(run_id, NOW)


def test_runs_finish_is_true_exactly_once_across_racing_threads(runs):
    run_id = opened(runs, planned=1)
    runs.report(run_id, "only", {"succeeded": 1})
    barrier = threading.Barrier(8)
    wins, errors = [], []

    def finisher():
        try:
            barrier.wait(timeout=10)
            wins.append(runs.finish(run_id, NOW))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=finisher) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert not errors
    assert sorted(wins) == [False] * 7 + [True]
    run = runs.get(run_id)
    assert (run["state"], run["finished_at"]) == (FINISHED, NOW)
    assert not runs.finish(run_id, NOW)


def test_runs_with_nothing_planned_finishes_when_planning_closes(runs):
    run_id = run_id_for("sched-1", FIRE_AT)
    runs.open(run_id, "sched-1", FIRE_AT, NOW)
    # Still planning: not finished yet, even at zero outstanding.
    assert not runs.finish(run_id, NOW)

    closed = runs.close_planning(run_id, 0, {}, NOW)

    assert (closed["state"], closed["outstanding"]) == (RUNNING, 0)
    assert is_done(closed)
    assert runs.finish(run_id, NOW)
    assert [r["_id"] for r in runs.unfinished()] == []


def test_runs_run_id_is_deterministic_per_schedule_and_fire_time():
    assert run_id_for("s", FIRE_AT) == run_id_for("s", FIRE_AT) == "s@20240601T115900Z"
    assert run_id_for("s", FIRE_AT + timedelta(seconds=1)) != run_id_for("s", FIRE_AT)


def test_a_redelivered_report_counts_a_child_whose_parent_count_was_lost(embedded_mongo_url):
    # Given a child run that ended, and a crash before its parent counted it
    from crawlsched.flow.coordination import record_report
    from crawlsched.messages import ReportMessage
    from crawlsched.runtime import Runtime
    from tests.conftest import settings_for_tests

    rt = Runtime(settings_for_tests(mongo_url=embedded_mongo_url, broker_url="stub://"))
    parent, child = "s@20261123T080000Z", "s@20261123T080000Z/1"
    dispatch = "d" * 32
    rt.runs.open(parent, "s", NOW, NOW)
    rt.runs.open(child, "s", NOW, NOW, parent_id=parent)
    rt.runs.close_planning(parent, 3, {}, NOW, children=1)
    rt.runs.close_planning(child, 3, {}, NOW)
    rt.db.profiles.insert_many(
        [
            {"_id": i, "run_id": child, "last_dispatch_id": dispatch, "last_outcome": "succeeded"}
            for i in range(3)
        ]
    )
    report = ReportMessage(run_id=child, dispatch_id=dispatch, collection="profiles", phase="crawl")
    rt.runs.report(child, report.report_key, {"succeeded": 3})
    assert rt.runs.finish(child, NOW)  # ...and the process died here
    assert rt.runs.get(parent)["state"] == RUNNING

    # When the report is redelivered (twice)
    assert record_report(rt, report) is False
    assert record_report(rt, report) is False

    # Then the parent counted its child once and ended
    run = rt.runs.get(parent)
    assert (run["state"], run["counts"], run["outstanding"]) == (FINISHED, {"succeeded": 3}, 0)


def test_a_child_run_stops_with_its_parent_or_by_itself(embedded_mongo_url):
    from crawlsched.runtime import Runtime
    from tests.conftest import settings_for_tests

    rt = Runtime(settings_for_tests(mongo_url=embedded_mongo_url, broker_url="stub://"))
    parent = "s@20261123T080000Z"
    children = [f"{parent}/1", f"{parent}/2"]
    rt.runs.open(parent, "s", NOW, NOW)
    for child in children:
        rt.runs.open(child, "s", NOW, NOW, parent_id=parent)
    assert not any(rt.runs.stopping(r, "profile") for r in [parent, *children])
    rt.runs.request_stop(children[0], NOW, task="profile")
    assert rt.runs.stopping(children[0], "profile")
    assert not rt.runs.stopping(children[0], "article")
    assert not rt.runs.stopping(children[1], "profile") and not rt.runs.stopping(parent, "profile")
    rt.runs.request_stop(parent, NOW)  # a stop while the parent plans: children see it too
    assert all(rt.runs.stopping(r, "article") for r in [parent, *children])
