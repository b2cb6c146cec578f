"""GET /v1/runs/{run}/timeline over a run with a known history: the known buckets, counts,
pages per depth, waits and stage times, read live while the run goes on and, once the
coordinator ends it, from what its end froze, still whole after retention deletes the run's
task history and discovered jobs. And the run's page keeps the status page's cookie rules."""

from __future__ import annotations

from datetime import datetime, timedelta

from crawlsched.api.auth import COOKIE
from crawlsched.catalog import JobState
from crawlsched.flow.coordination import finish_if_done
from crawlsched.planning.run_names import run_id_for
from tests.support.api import serving


def at(iso: str | None) -> datetime | None:
    return None if iso is None else datetime.fromisoformat(iso)


def history_row(run_id: str, start: datetime, ended_s: float, outcome: str) -> dict:
    ended = start + timedelta(seconds=ended_s)
    return {
        "run_id": run_id,
        "job_id": f"job-{ended_s}",
        "task": "article",
        "started_at": ended - timedelta(milliseconds=100),
        "ended_at": ended,
        "outcome": outcome,
    }


def child_job(run_id: str, n: int, state: JobState) -> dict:
    return {
        "target": f"https://example.com/p/{n}",
        "url": f"https://example.com/p/{n}",
        "media_name": "web",
        "task": "article",
        "scope_run": run_id,
        "run_id": run_id,
        "depth": 1,
        "state": int(state),
    }


def test_run_timeline_live_then_frozen_survives_retention(embedded_mongo_url):
    with serving(embedded_mongo_url) as api:
        rt = api.runtime
        created = (rt.now() - timedelta(hours=1)).replace(microsecond=0)
        planned = created + timedelta(seconds=1)
        run_id = run_id_for("sweep-websites", created)
        rt.runs.open(run_id, "sweep-websites", created, created)
        rt.runs.close_planning(run_id, 3, {}, planned)
        # Given: three planned pages ended (two succeeded, one exhausted) and found two
        # children; a machinery failure given back to the run (a redo) is no end.
        rt.history.add(
            [
                history_row(run_id, planned, 0.5, "succeeded"),
                history_row(run_id, planned, 0.7, "succeeded"),
                history_row(run_id, planned, 1.0, "redo"),
                history_row(run_id, planned, 2.2, "exhausted"),
            ]
        )
        rt.db.websites.insert_many([child_job(run_id, n, JobState.PENDING) for n in (1, 2)])
        rt.runs.report(
            run_id, "k1", {"succeeded": 2, "exhausted": 1}, discovered=2, cut={"depth": 4}
        )
        rt.waiting.park(
            {
                "_id": "dispatch-1",
                "run_id": run_id,
                "needs": ["host:https://example.com"],
                "media_name": "web",
                "jobs": 2,
                "enqueued_at": planned,
            }
        )

        live = api.reader.get(f"/v1/runs/{run_id}/timeline")
        assert live.status_code == 200, live.text
        t = live.json()
        assert (t["ended"], t["frozen"], t["state"]) == (False, False, "running")
        assert t["progress"] == {"planned": 3, "discovered": 2, "done": 3, "outstanding": 2}
        assert t["outcomes"] == {"succeeded": 2, "exhausted": 1}
        assert t["cut"] == {"depth": 4}
        assert t["throughput"]["width_s"] == 1.0
        # From the run's creation, a second before planning closed.
        assert t["throughput"]["counts"] == [0, 2, 0, 1]
        assert t["throughput"]["rates"] == [0.0, 2.0, 0.0, 1.0]
        assert at(t["throughput"]["start"]) == created
        assert t["by_depth"] == [
            {"depth": 0, "discovered": 3, "outstanding": 0, "done": 3},
            {"depth": 1, "discovered": 2, "outstanding": 2, "done": 0},
        ]
        [waiting] = t["waiting"]
        assert waiting["needs"] == ["host:https://example.com"]
        assert (waiting["media"], waiting["batches"], waiting["jobs"]) == ("web", 1, 2)
        assert at(t["stages"]["created_at"]) == created
        assert at(t["stages"]["planned_at"]) == planned
        assert at(t["stages"]["first_fetch_at"]) == planned + timedelta(seconds=0.4)
        assert at(t["stages"]["last_fetch_at"]) == planned + timedelta(seconds=2.2)
        assert t["stages"]["ended_at"] is None
        assert t["executions"] == 4

        # When: the children end (one succeeded, one given up) and the coordinator ends the
        # run through its own path.
        rt.db.websites.update_many({"scope_run": run_id}, {"$set": {"state": 4}})
        rt.db.waiting_batches.delete_many({"run_id": run_id})
        rt.history.add(
            [
                history_row(run_id, planned, 3.9, "succeeded"),
                history_row(run_id, planned, 4.1, "expired"),
            ]
        )
        run = rt.runs.report(run_id, "k2", {"succeeded": 1, "expired": 1})
        assert finish_if_done(rt, run)
        ended = api.reader.get(f"/v1/runs/{run_id}/timeline").json()
        assert (ended["ended"], ended["frozen"]) == (True, True)
        assert (ended["state"], ended["result"]) == ("finished", "incomplete")
        assert ended["progress"] == {"planned": 3, "discovered": 2, "done": 5, "outstanding": 0}
        assert ended["outcomes"] == {"succeeded": 3, "exhausted": 1, "expired": 1}
        assert ended["throughput"]["counts"] == [0, 2, 0, 1, 1, 1]
        assert ended["throughput"]["pages"] == 5
        assert ended["by_depth"][1] == {"depth": 1, "discovered": 2, "outstanding": 0, "done": 2}
        assert ended["waiting"] == []
        assert at(ended["stages"]["last_fetch_at"]) == planned + timedelta(seconds=4.1)
        assert at(ended["stages"]["ended_at"]) > at(ended["stages"]["last_fetch_at"])

        # Then: retention deletes the run's history and discovered jobs; the page is unchanged.
        assert rt.db.task_history.delete_many({"run_id": run_id}).deleted_count == 6
        assert rt.db.websites.delete_many({"scope_run": run_id}).deleted_count == 2
        after = api.reader.get(f"/v1/runs/{run_id}/timeline").json()
        assert {k: v for k, v in after.items() if k != "now"} == {
            k: v for k, v in ended.items() if k != "now"
        }
        assert api.reader.get(f"/v1/runs/{run_id}/history").json()["items"] == []


def test_run_timeline_of_an_unknown_run_or_without_a_token_is_refused(embedded_mongo_url):
    with serving(embedded_mongo_url) as api:
        assert api.reader.get("/v1/runs/nope@20260101T000000Z/timeline").status_code == 404
        assert api.anonymous.get("/v1/runs/nope@20260101T000000Z/timeline").status_code == 401


def test_run_page_needs_a_token_in_its_cookie(embedded_mongo_url):
    with serving(embedded_mongo_url) as api:
        path = "/status/runs/sweep-websites@20260101T000000Z"
        # No cookie, or an unknown token's: the login form.
        assert 'name="token"' in api.anonymous.get(path).text
        unknown = {"Cookie": f"{COOKIE}=cs_nobody_nothing"}
        assert 'name="token"' in api.anonymous.get(path, headers=unknown).text
        # An admin's page is one with buttons (its role named for the page's script).
        admin_cookie = {"Cookie": f"{COOKIE}={api.admin_token}"}
        assert 'content="admin"' in api.anonymous.get(path, headers=admin_cookie).text
        page = api.anonymous.get(path, headers={"Cookie": f"{COOKIE}={api.read_token}"})
        assert page.status_code == 200
        assert 'id="chart"' in page.text and 'id="actions"' in page.text
        # The run id is read by the page's script from the address, never written into it.
        assert "20260101T000000Z" not in page.text
