"""Starting and stopping runs through the API, with a broker that reaches workers (the stub
broker and in-process worker threads, as in the standalone server)."""

from __future__ import annotations

from crawlsched.demo.website import DemoWebsite
from crawlsched.reference import load_reference
from crawlsched.runtime import get_runtime
from tests.support.api import ApiServer
from tests.support.waiting import wait_for


def test_a_run_started_through_the_api_finishes_once(stub_pipeline):
    stub_pipeline(threads=2)
    rt = get_runtime()
    rt.create_indexes()
    rt.reference.load(load_reference())
    rt.schedules.ensure_defaults(rt.now())
    with DemoWebsite() as site, ApiServer(rt, delivers=True) as api:
        added = api.admin.post(
            "/v1/jobs", json={"kind": "website", "media": "web", "target": f"{site.base_url}/news/"}
        )
        assert added.status_code == 201, added.text
        key = {"Idempotency-Key": "run-once-1"}
        started = api.admin.post("/v1/runs", json={"schedule_id": "sweep-websites"}, headers=key)
        assert started.status_code == 202, started.text
        again = api.admin.post("/v1/runs", json={"schedule_id": "sweep-websites"}, headers=key)
        assert again.json() == started.json()  # the retry started nothing more
        run_id = started.json()["run_id"]

        def finished() -> dict | None:
            run = api.reader.get(f"/v1/runs/{run_id}").json()
            return run if run.get("state") == "finished" else None

        run = wait_for(finished, 60, f"run {run_id} to finish")
        assert run["counts"] == {"succeeded": 1}
        assert [r["_id"] for r in rt.runs.page(10, schedule_id="sweep-websites")].count(run_id) == 1
        assert rt.db.runs.count_documents({"schedule_id": "sweep-websites"}) == 1
        history = api.reader.get(f"/v1/runs/{run_id}/history").json()["items"]
        assert [row["outcome"] for row in history] == ["succeeded"]

        ended = api.admin.post(f"/v1/runs/{run_id}/stop")
        assert ended.status_code == 409 and "already ended" in ended.json()["detail"]
        no_children = api.admin.post(f"/v1/runs/{run_id}/children/stop")
        assert no_children.status_code == 409


def test_a_child_run_s_id_with_its_slash_reaches_its_routes_and_page(stub_pipeline):
    from urllib.parse import quote

    from crawlsched.planning.run_names import child_run_id, run_id_for

    # Given a multi-process run and its child `<run>/1`
    stub_pipeline(threads=2)
    rt = get_runtime()
    rt.create_indexes()
    rt.schedules.ensure_defaults(rt.now())
    now = rt.now()
    parent = run_id_for("sweep-websites", now)
    child = child_run_id(parent, 1)
    rt.runs.open(parent, "sweep-websites", now, now)
    rt.runs.open(child, "sweep-websites", now, now, parent_id=parent)
    with ApiServer(rt, delivers=True) as api:
        # When the child is asked for by its id, escaped as a path segment or not
        for path in (quote(child, safe=""), child):
            run = api.reader.get(f"/v1/runs/{path}")
            # Then its own routes answer for it, not the parent's nor a 404
            assert run.status_code == 200, run.text
            assert run.json()["_id"] == child
            timeline = api.reader.get(f"/v1/runs/{path}/timeline")
            assert timeline.status_code == 200 and timeline.json()["run_id"] == child
            history = api.reader.get(f"/v1/runs/{path}/history")
            assert history.status_code == 200 and history.json()["items"] == []
            page = api.reader.get(f"/status/runs/{path}")
            assert page.status_code == 200 and "<html" in page.text.lower()
        children = api.reader.get(f"/v1/runs/{quote(parent, safe='')}/children")
        assert children.status_code == 200
        assert api.reader.get(f"/v1/runs/{quote(parent, safe='')}").json()["_id"] == parent
        # And a run that does not exist is still a 404, slash or not
        assert api.reader.get(f"/v1/runs/{quote(parent, safe='')}%2F9").status_code == 404
        # And the child can be stopped through its own route
        stopped = api.admin.post(f"/v1/runs/{quote(child, safe='')}/stop")
        assert stopped.status_code in (200, 202), stopped.text
        assert rt.runs.get(child).get("stop_requested") is True
        assert not rt.runs.get(parent).get("stop_requested")
