"""Stop a run, multi-process runs and task history, on the stub broker with real actors.

Real actors and stores (embedded), in-process worker threads; the driver is the test plug-in
`slow` (it fails targets containing "boom"), so batches take long enough to be stopped.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from crawlsched.flow.stopping import stop_children, stop_run
from crawlsched.planning.run_names import ENDED, FINISHED, STOPPED, run_id_for
from crawlsched.runtime import Runtime, get_runtime
from crawlsched.store.history import row_id
from tests.support.waiting import wait_for
from tests.test_admission_flow import (
    SLOW,
    _fire_profiles,
    _setup,
    _twitter_jobs,
    run_waiting_for_an_account,
)


def _the_run(rt: Runtime):
    """The profile sweep's run (the website sweep fires too, with nothing to do)."""
    return rt.db.runs.find_one({"schedule_id": "sweep-profiles", "parent_id": None})


def _ended(rt: Runtime, run_id: str):
    return lambda: (r := rt.runs.get(run_id)) is not None and r["state"] in ENDED and r


def _events(rt: Runtime, run_id: str) -> list[str]:
    return [e["event"] for e in rt.db.activity.find({"run_id": run_id}).sort("_id", 1)]


def test_stop_releases_waiting_batches_and_reports_stopped_once(stub_pipeline):
    # Given no account at all: the run's 30 jobs wait in two batches
    rt, run_id = run_waiting_for_an_account(stub_pipeline)

    # When the run is stopped (twice: the second is refused, it has ended)
    summary = stop_run(rt, run_id)

    # Then the waiting batches are gone, the jobs are pending untouched, the run ended stopped
    assert summary.released_jobs == 30 and summary.ended == [run_id]
    run = rt.runs.get(run_id)
    assert (run["state"], run["result"], run["counts"]) == (STOPPED, "stopped", {"stopped": 30})
    assert rt.waiting.all() == []
    jobs = list(rt.db.profiles.find({}))
    assert {(j["state"], j.get("attempt_count")) for j in jobs} == {(1, 0)}
    # The event is stored right after the run's end: poll for it rather than race it
    wait_for(lambda: "RunStopped" in _events(rt, run_id), 30, "the RunStopped event")
    assert _events(rt, run_id) == ["RunStarted", "RunStopped"]
    try:
        stop_run(rt, run_id)
        raise AssertionError("stopping an ended run must be refused")
    except ValueError as e:
        assert "already ended" in str(e)


def test_stop_mid_crawl_dispatches_nothing_after_and_returns_every_lease(
    stub_pipeline, monkeypatch
):
    # Given 2 accounts, 200 jobs (8 batches of 25) and a driver taking 50 ms per job
    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0.05")
    stub_pipeline(threads=4, stop_check_s=0.2, **SLOW)
    rt = get_runtime()
    _setup(rt, accounts=2)
    _twitter_jobs(rt, 200, 0, "u")
    _fire_profiles(rt)
    wait_for(lambda: rt.db.task_history.count_documents({}) >= 10, 60, "crawling to start")
    run_id = _the_run(rt)["_id"]

    # When the run is stopped mid-crawl
    stopped_at = rt.now()
    stop_run(rt, run_id)
    run = wait_for(_ended(rt, run_id), 60, "the run to end after the stop")

    # Then it ended stopped, every job is accounted for once, and some were given back
    assert run["state"] == STOPPED
    counts = run["counts"]
    assert sum(counts.values()) == run["planned"] == 200
    assert counts.get("stopped", 0) > 0 and counts.get("succeeded", 0) > 0
    # Nothing started later than one stop check after the stop was recorded: two batches crawl
    # at once (two accounts), and each may start at most stop_check_s / job_s jobs (plus the
    # one under way) before its next check sees the stop
    recorded = run.get("stop_requested_at") or stopped_at
    late = rt.db.task_history.count_documents({"started_at": {"$gt": recorded}})
    bound = 2 * (round(0.2 / 0.05) + 1)
    assert late <= bound, late
    assert rt.db.task_history.count_documents({"run_id": run_id}) == counts["succeeded"]
    # Leases all came back, nothing waits, no job is left running
    assert rt.inventory.overview(rt.now())["account"]["held"] == 0
    assert rt.waiting.all() == []
    assert rt.jobs("profiles").summary().get("2", 0) == 0
    wait_for(lambda: "RunStopped" in _events(rt, run_id), 30, "the RunStopped event")
    assert _events(rt, run_id).count("RunStopped") == 1
    assert "RunFinished" not in _events(rt, run_id)


def test_multi_process_run_fans_out_and_ends_after_its_children(stub_pipeline, monkeypatch):
    # Given a sweep with shards: 3 and 150 jobs (6 batches)
    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0.001")
    stub_pipeline(**SLOW)
    rt = get_runtime()
    _setup(rt, accounts=2)
    rt.db.schedules.update_one({"_id": "sweep-profiles"}, {"$set": {"shards": 3}})
    _twitter_jobs(rt, 150, 0, "u")

    # When it fires
    _fire_profiles(rt)
    parent = wait_for(lambda: (r := _the_run(rt)) and r["state"] in ENDED and r, 60, "the run")

    # Then three children shared the jobs, each ended, and the parent ended last, once
    children = rt.runs.children_of(parent["_id"])
    assert [c["_id"] for c in children] == [f"{parent['_id']}/{n}" for n in (1, 2, 3)]
    assert all(c["state"] == FINISHED and c["planned"] > 0 for c in children)
    assert sum(c["planned"] for c in children) == parent["planned"] == 150
    assert parent["counts"] == {"succeeded": 150} and parent["children"] == 3

    def ends() -> list[tuple[str, str]]:
        query = {"event": "RunFinished", "schedule_id": "sweep-profiles"}
        return [(e["run_id"], e["event"]) for e in rt.db.activity.find(query).sort("_id", 1)]

    # The parent's event is stored right after its end: poll for it rather than race it
    wait_for(lambda: len(ends()) >= 4, 30, "the parent's RunFinished event")
    assert len(ends()) == 4 and ends()[-1] == (parent["_id"], "RunFinished")
    assert rt.db.task_history.count_documents({"schedule_id": "sweep-profiles"}) == 150


def test_stop_children_stops_them_and_the_parent_ends(stub_pipeline):
    # Given a multi-process run whose batches all wait (no account)
    stub_pipeline(**SLOW)
    rt = get_runtime()
    _setup(rt, accounts=0)
    rt.db.schedules.update_one({"_id": "sweep-profiles"}, {"$set": {"shards": 2}})
    _twitter_jobs(rt, 50, 0, "u")
    _fire_profiles(rt)
    wait_for(lambda: sum(d["jobs"] for d in rt.waiting.all()) == 50, 30, "50 jobs waiting")
    parent_id = _the_run(rt)["_id"]

    # When its children are stopped
    summary = stop_children(rt, parent_id)

    # Then both children ended stopped, and the parent (not itself stopped) ended with them
    assert sorted(summary.runs) == [f"{parent_id}/1", f"{parent_id}/2"]
    assert {c["state"] for c in rt.runs.children_of(parent_id)} == {STOPPED}
    parent = rt.runs.get(parent_id)
    assert parent["state"] == FINISHED and parent["counts"] == {"stopped": 50}
    assert not parent.get("stop_requested")


def test_stop_one_task_leaves_the_other_running(stub_pipeline, monkeypatch):
    # Given a run with profile and publication jobs, all waiting (no account)
    stub_pipeline(**SLOW)
    rt = get_runtime()
    _setup(rt, accounts=0)
    _twitter_jobs(rt, 20, 0, "u")
    rt.db.profiles.update_many(
        {"target": {"$in": [f"u{i}" for i in range(10)]}}, {"$set": {"task": "publication"}}
    )
    _fire_profiles(rt)
    wait_for(lambda: sum(d["jobs"] for d in rt.waiting.all()) == 20, 30, "20 jobs waiting")
    run_id = rt.waiting.all()[0]["run_id"]

    # When only the publication task is stopped
    summary = stop_run(rt, run_id, task="publication")

    # Then its 10 jobs were given back; the profile jobs still wait; the run goes on
    assert summary.released_jobs == 10
    assert {d["task"] for d in rt.waiting.all()} == {"profile"}
    run = rt.runs.get(run_id)
    assert run["state"] not in ENDED and run["counts"] == {"stopped": 10}
    assert run["stopped_tasks"] == ["publication"]


def test_history_rows_per_execution_with_outcome_account_and_corrections(
    stub_pipeline, monkeypatch
):
    # Given one account and 30 jobs of which 5 always fail
    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0.001")
    stub_pipeline(**SLOW)
    rt = get_runtime()
    _setup(rt, accounts=1)
    _twitter_jobs(rt, 25, 0, "ok")
    _twitter_jobs(rt, 5, 0, "boom")
    _fire_profiles(rt)
    run = wait_for(lambda: (r := _the_run(rt)) and r["state"] in ENDED and r, 60, "the run")

    # Then one history row per execution with the right outcome, account, node and times
    rows = rt.history.for_run(run["_id"])
    assert len(rows) == 30
    by_outcome = {o: [r for r in rows if r["outcome"] == o] for o in ("succeeded", "failed")}
    assert len(by_outcome["succeeded"]) == 25 and len(by_outcome["failed"]) == 5
    assert all("always fails" in r["error"] for r in by_outcome["failed"])
    assert all(r["items_stored"] == 1 for r in by_outcome["succeeded"])
    assert {r["account"] for r in rows} == {"acct0"} and {r["node"] for r in rows} == {None}
    assert all(r["ended_at"] >= r["started_at"] for r in rows)
    assert {r["schedule_id"] for r in rows} == {"sweep-profiles"}
    job = rt.db.profiles.find_one({"target": "boom0"})
    assert [r["outcome"] for r in rt.history.for_job(f"oid:{job['_id']}")] == ["failed"]

    # When one row, then a batch of two, then all failed rows are corrected
    first, second, third = by_outcome["succeeded"][:3]
    now = rt.now()
    assert rt.history.correct({"note": "checked"}, "audit", now, ids=[first["_id"]]) == 1
    ids = [second["_id"], third["_id"]]
    assert rt.history.correct({"outcome": "failed", "error": "bad data"}, "qa", now, ids=ids) == 2
    assert rt.history.correct({"outcome": "succeeded"}, "site was up", now, outcome="failed") == 7

    # Then the values changed and each row keeps its audit trail
    after = {r["_id"]: r for r in rt.history.for_run(run["_id"])}
    assert after[first["_id"]]["note"] == "checked"
    assert [c["reason"] for c in after[second["_id"]]["corrections"]] == ["qa", "site was up"]
    assert all(r["outcome"] == "succeeded" for r in after.values())
    assert row_id(str(first["_id"])) == first["_id"]


def test_stop_checks_cost_reads_per_batch_not_per_job(stub_pipeline, monkeypatch):
    # Given 50 jobs in 2 batches, and every read of a run's stop flag counted
    from crawlsched.store.runs import MongoRunStore

    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0.001")
    stub_pipeline(stop_check_s=30, **SLOW)
    rt = get_runtime()
    _setup(rt, accounts=1)
    _twitter_jobs(rt, 50, 0, "u")
    reads: list[str] = []
    real = MongoRunStore.hold_state

    def counted(self, run_id, task):
        reads.append(run_id)
        return real(self, run_id, task)

    monkeypatch.setattr(MongoRunStore, "hold_state", counted)

    # When the sweep runs to its end
    _fire_profiles(rt)
    wait_for(lambda: (r := _the_run(rt)) and r["state"] in ENDED, 60, "the run")

    # Then the flag was read per batch (planner once, each admission attempt, each crawl's
    # start), never per job: 50 jobs would mean 50 reads or more
    assert rt.db.run_resources.count_documents({}) == 2
    assert rt.db.task_history.count_documents({}) == 50
    profile_reads = [r for r in reads if r.startswith("sweep-profiles")]
    assert 3 <= len(profile_reads) <= 10, profile_reads


def test_history_and_stop_checks_cost_a_few_commands_per_batch_not_per_job(
    stub_pipeline, monkeypatch
):
    # Given two sweeps of 200 jobs each (8 batches): the first with task history
    # and stop checks switched off (the baseline), the second as built
    from crawlsched.crawl import records as crawl_records
    from crawlsched.flow.stop_watch import StopWatch

    monkeypatch.setenv("CRAWLSCHED_TEST_SLOW_DRIVER_S", "0")
    stub_pipeline(threads=1, **SLOW)  # one thread: both sweeps run the same commands
    rt = get_runtime()
    _setup(rt, accounts=8)  # one per batch: no batch waits, so admission costs the same

    def sweep(prefix: str, fire_at: datetime) -> int:
        from crawlsched.actors.planner import plan_crawls

        _twitter_jobs(rt, 200, 0, prefix)
        rt.counter.reset()
        plan_crawls.send("sweep-profiles", fire_at.isoformat())
        run_id = run_id_for("sweep-profiles", fire_at)
        wait_for(_ended(rt, run_id), 60, f"the sweep of {prefix} to end")
        seen.append(run_id)
        return rt.counter.boundary_total

    seen: list[str] = []
    with monkeypatch.context() as off:
        off.setattr(crawl_records, "record_history", lambda *args: None)
        off.setattr(StopWatch, "stopped", lambda self: False)
        baseline = sweep("a", rt.now() - timedelta(minutes=2))
    with_history = sweep("b", rt.now() - timedelta(minutes=1))
    with monkeypatch.context() as off:
        off.setattr(crawl_records, "record_history", lambda *args: None)
        off.setattr(StopWatch, "stopped", lambda self: False)
        again = sweep("c", rt.now())

    # Then the difference is a few commands per batch (one insert, one read of who served it,
    # the stop reads): far below one per job (a baseline before and after brackets any drift;
    # quiet, it is about 2.5 per batch of 25, 0.1 per job); and the history is there
    extra = with_history - max(baseline, again)
    per_job = [round(n / 200, 3) for n in (baseline, again, with_history)]
    print(f"commands/job: baselines {per_job[0]} and {per_job[1]}, with history {per_job[2]}")
    assert rt.db.task_history.count_documents({"run_id": seen[1]}) == 200
    assert extra < 200 * 0.5, (baseline, with_history, again)
