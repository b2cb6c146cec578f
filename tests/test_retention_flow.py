"""Retention on a real discovery run (the actors on the stub broker, a served site, a webhook
receiver): once the run has ended and each retention has passed on an injected clock, the
embedded store's sweep removes its discovered pages, its task history, its events and its
webhook delivery, each at its own time, never the imported job; `run status`, `runs` and
GET /v1/runs/{id} still answer with the run's counts."""

from __future__ import annotations

import json
from datetime import timedelta

from typer.testing import CliRunner

from crawlsched.cli import app
from crawlsched.logs import configure_logging
from crawlsched.planning.run_names import FINISHED, run_id_for
from crawlsched.runtime import get_runtime
from crawlsched.store.embedded.ttl import sweep_expired
from tests.support.api import ApiServer
from tests.support.graph_run import add_graph_schedule, prepare
from tests.support.link_graph import GraphSite, LinkGraph
from tests.support.waiting import wait_for
from tests.support.webhook_receiver import WebhookReceiver

HOUR = 3600
# A different time for each kind, so each is seen to go at its own.
RETAIN = {
    "retain_discovered_s": 1 * HOUR,
    "retain_history_s": 2 * HOUR,
    "retain_deliveries_s": 3 * HOUR,
    "retain_activity_s": 4 * HOUR,
}


def _run_a_discovery(rt, schedule_id: str) -> tuple[str, str]:
    from crawlsched.actors.planner import plan_crawls

    # /p/0 → /p/1, /p/2 (depth 1) → /p/3 and a dead link (depth 2)
    graph = LinkGraph({0: ["/p/1", "/p/2"], 1: ["/p/3"], 2: ["/d/0"], 3: []})
    fire_at = rt.now() - timedelta(seconds=1)
    with GraphSite(graph) as site, WebhookReceiver() as receiver:
        target = add_graph_schedule(rt, site.base_url, schedule_id, webhook=receiver.url)
        plan_crawls.send(schedule_id, fire_at.isoformat())
        run_id = run_id_for(schedule_id, fire_at)
        wait_for(lambda: (r := rt.runs.get(run_id)) and r["state"] == FINISHED, 60, "the run")
        wait_for(
            lambda: rt.db.webhook_deliveries.find_one({"run_id": run_id, "state": "delivered"}),
            60,
            "the webhook delivery",
        )
        wait_for(lambda: "announce" not in rt.runs.get(run_id), 60, "the run's announcement")
    return run_id, target


def _left(rt, run_id: str, target: str) -> dict[str, int]:
    return {
        "discovered": rt.db.websites.count_documents({"scope_run": run_id}),
        "imported": rt.db.websites.count_documents({"target": target, "scope_run": None}),
        "history": rt.db.task_history.count_documents({"run_id": run_id}),
        "deliveries": rt.db.webhook_deliveries.count_documents({"run_id": run_id}),
        "events": rt.db.activity.count_documents({"run_id": run_id}),
    }


def test_ended_run_forgets_pages_history_deliveries_and_events_but_keeps_its_counts(
    stub_pipeline, embedded_mongo_url, monkeypatch
):
    stub_pipeline(threads=2, **RETAIN)
    rt = get_runtime()
    prepare(rt)
    run_id, target = _run_a_discovery(rt, "kept-graph")
    run = rt.runs.get(run_id)
    ended = run["finished_at"]
    assert run["planned"] == 1 and run["discovered"] == 4

    # Given what the run left: 4 discovered pages and the seed's marker, 5 history rows, its
    # start and end events and its delivery; the imported job carries no expiry date at all
    left = _left(rt, run_id, target)
    assert left == {"discovered": 5, "imported": 1, "history": 5, "deliveries": 1, "events": 2}
    imported = rt.db.websites.find_one({"target": target, "scope_run": None})
    assert "expire_at" not in imported

    def sweep(at):
        with rt.db.locked():
            return sweep_expired(rt.db.raw, at)

    def run_answers():
        """What `runs`, `run status` and GET /v1/runs/{id} say of the run."""
        runner = CliRunner()
        monkeypatch.setenv("CRAWLSCHED_MONGO_URL", embedded_mongo_url)

        def cli(*args):
            result = runner.invoke(app, list(args))
            configure_logging("json", "INFO")
            assert result.exit_code == 0, result.output
            return result.stdout

        listed = [json.loads(line) for line in cli("runs", "--json").splitlines()]
        status = json.loads(cli("run", "status", run_id, "--json"))
        table = cli("run", "status", run_id)
        with ApiServer(rt) as api:
            response = api.reader.get(f"/v1/runs/{run_id}")
        assert response.status_code == 200, response.text
        return listed, status, table, response.json()

    before = run_answers()

    # When the clock is just short of the run's end + the pages' retention: nothing goes
    assert sweep(ended + timedelta(seconds=RETAIN["retain_discovered_s"] - 1)) == {}
    # Then at it, the discovered pages go, and only they
    assert sweep(ended + timedelta(seconds=RETAIN["retain_discovered_s"])) == {"websites": 5}
    assert _left(rt, run_id, target) == {**left, "discovered": 0}
    # After the history's retention (counted from each execution's end, before the run's end)
    assert sweep(ended + timedelta(seconds=RETAIN["retain_history_s"])) == {"task_history": 5}
    # After the deliveries' (counted from the delivery, after the run's end), then the events'
    delivered_at = rt.db.webhook_deliveries.find_one({"run_id": run_id})["delivered_at"]
    assert delivered_at >= ended
    assert sweep(delivered_at + timedelta(seconds=RETAIN["retain_deliveries_s"])) == {
        "webhook_deliveries": 1
    }
    far = ended + timedelta(seconds=RETAIN["retain_activity_s"] + HOUR)
    removed = sweep(far)
    # (the schedule's own ScheduleCreated event goes with them)
    assert removed == {"activity": 3}
    assert _left(rt, run_id, target) == {
        "discovered": 0, "imported": 1, "history": 0, "deliveries": 0, "events": 0
    }  # fmt: skip
    # The imported job is never stamped and never swept, however late the clock
    assert sweep(far + timedelta(days=3650)) == {}
    assert rt.db.websites.find_one({"_id": imported["_id"]}) == imported

    # The run still answers everywhere, with the same counts as before its pages went
    listed, status, table, served = run_answers()
    for then, now in zip(before, (listed, status, table, served), strict=True):
        if isinstance(now, str):
            assert run_id in now and "succeeded" in now
            continue
        for doc_then, doc_now in ((then, now),) if isinstance(now, dict) else _by_id(then, now):
            for field in ("state", "result", "planned", "discovered", "counts", "items", "cut"):
                assert doc_now.get(field) == doc_then.get(field), field
    assert any(r["_id"] == run_id for r in listed)
    assert status["counts"] == run["counts"] and sum(status["counts"].values()) == 5
    assert served["given_up"] == [] and served["by_depth"][0]["discovered"] == 1


def _by_id(then: list[dict], now: list[dict]):
    ids = {d["_id"]: d for d in then}
    assert {d["_id"] for d in now} == set(ids)
    return [(ids[d["_id"]], d) for d in now]
