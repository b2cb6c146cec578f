"""A write answered by the standalone server is on disk (`standalone/durable.py`), and a
one-time run exists in the store when `run now` answers (`schedule_ops.run_now`).

The server keeps its store in memory: once, a `kill -9` within a snapshot interval of `run
now` lost the run (its plan message lived in the in-process broker, its document was not yet
in a snapshot), and the run that was announced never came. Now every write is journaled as it
is applied, and a write is answered once the journal holding it is flushed to disk.
"""

from __future__ import annotations

import anyio
import httpx
from fastapi import FastAPI, Response

from crawlsched.flow import schedule_ops
from crawlsched.flow.planning import plan_run
from crawlsched.planning.run_names import run_id_for
from crawlsched.runtime import Runtime
from crawlsched.standalone.durable import DurableBeforeAnswer
from tests.conftest import settings_for_tests


def _call(events: list[str], method: str, path: str) -> int:
    """`method path` through the wrapper around an app that records what it did, and when
    the answer went out; the status."""
    statuses: list[int] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])
            events.append("answered")

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": [], "client": ("127.0.0.1", 1), "server": ("app", 80),
    }  # fmt: skip
    anyio.run(_recording_app(events), scope, receive, send)
    return statuses[0]


def _recording_app(events: list[str]) -> DurableBeforeAnswer:
    app = FastAPI()

    @app.post("/write", status_code=201)
    def write() -> dict:
        events.append("wrote")
        return {}

    @app.post("/refused")
    def refused() -> Response:
        events.append("refused")
        return Response(status_code=409)

    @app.get("/read")
    def read() -> dict:
        events.append("read")
        return {}

    return DurableBeforeAnswer(app, lambda: events.append("sync"))


def test_a_write_is_answered_only_after_a_journal_flush_begun_once_it_was_made():
    events: list[str] = []
    assert _call(events, "POST", "/write") == 201
    assert events == ["wrote", "sync", "answered"]


def test_reads_and_refused_writes_wait_for_no_flush():
    events: list[str] = []
    assert _call(events, "GET", "/read") == 200
    assert _call(events, "POST", "/refused") == 409
    assert events == ["read", "answered", "refused", "answered"]


def test_run_now_opens_the_run_its_plan_message_then_plans(embedded_mongo_url):
    # Given a schedule, and a broker that only keeps what it is sent
    rt = Runtime(settings_for_tests(mongo_url=embedded_mongo_url, broker_url="stub://"))
    rt.create_indexes()
    rt.schedules.ensure_defaults(rt.now())
    sent: list[tuple[str, str]] = []
    # When a run is started now
    run_id = schedule_ops.run_now(rt, "sweep-websites", lambda *message: sent.append(message))
    # Then its message was sent, and the run is in the store, waiting to be planned
    ((schedule_id, fire_at),) = sent
    assert run_id == run_id_for(schedule_id, rt.runs.get(run_id)["fire_at"])
    assert (rt.runs.get(run_id)["state"], rt.runs.get(run_id)["planning"]) == ("planning", True)
    # And the message, when planned, plans that same run, once
    from datetime import datetime

    plan_run(rt, schedule_id, datetime.fromisoformat(fire_at), lambda batch: None)
    assert rt.db.runs.count_documents({"schedule_id": "sweep-websites"}) == 1
    assert rt.runs.get(run_id)["planning"] is False


def test_a_run_started_through_the_api_survives_a_kill_9_the_moment_it_was_answered(tmp_path):
    import json

    from tests.support.fault_standalone import FAST_RECOVERY
    from tests.support.link_graph import GraphSite, layered_graph
    from tests.support.standalone import Standalone, standalone_env
    from tests.support.waiting import wait_for

    # Given a standalone server with a site's start page as a job and a schedule of it
    graph = layered_graph(12, seed=7, fan_out=3)
    with GraphSite(graph, delay_s=0.02) as site:
        server = Standalone(standalone_env(tmp_path / "data", **FAST_RECOVERY)).start()
        try:
            server.crawl_site("durable", f"{site.base_url}/p/0")
            # When a run is started through the API and the server is killed the moment it
            # answered (its plan message dies with it, and anything not yet on disk)
            api = json.loads((server.data_dir / "api.json").read_text())
            answer = httpx.post(
                f"{api['url']}/v1/runs",
                json={"schedule_id": "durable"},
                headers={"Authorization": f"Bearer {api['token']}"},
                timeout=30,
            )
            server.kill()
            assert answer.status_code == 202, answer.text
            run_id = answer.json()["run_id"]
            server.start()

            # Then the run it announced is there after the restart, is planned and crawls
            # the whole site
            def ended() -> dict | None:
                try:
                    run = server.get(f"/v1/runs/{run_id}")
                except httpx.HTTPStatusError:
                    return None
                return run if run.get("state") == "finished" else None

            run = wait_for(ended, 120, f"run {run_id} to end after the restart")
            assert run["counts"] == {"succeeded": len(graph.reachable())}
        finally:
            server.kill()
