"""Every API route through real HTTP (uvicorn on a loopback port): what it answers, and its
errors as RFC 9457 problem details."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from bson import ObjectId

from crawlsched.resources.rules import AccountLimits
from crawlsched.runtime import Runtime
from tests.conftest import settings_for_tests
from tests.support.api import ApiServer, seeded_runtime

PROBLEM = "application/problem+json"


@pytest.fixture
def api(embedded_mongo_url: str) -> Iterator[ApiServer]:
    with ApiServer(seeded_runtime(embedded_mongo_url)) as server:
        yield server


def problem(response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert body["status"] == status
    assert body["type"].startswith("https://") and body["title"] and body["detail"]
    assert body["instance"] == response.request.url.path
    return body


def test_health_needs_no_token_and_names_each_service(api):
    response = api.anonymous.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["mongodb"] == {"ok": True, "detail": "embedded"}
    assert body["broker"] == {"ok": True, "detail": "in-process"}


def test_health_is_503_when_a_service_fails(embedded_mongo_url):
    rt = Runtime(settings_for_tests(mongo_url=embedded_mongo_url, broker_url="stub://"))
    with ApiServer(rt) as server:
        server.app.state.health_checks["broker"] = lambda: {"ok": False, "error": "down"}
        response = server.anonymous.get("/health")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"


def test_schedule_lifecycle(api):
    created = api.admin.post(
        "/v1/schedules",
        json={
            "id": "nightly",
            "cron": "30 2 * * *",
            "owner": "team-a",
            "collections": ["websites"],
        },
    )
    assert created.status_code == 201, created.text
    assert created.json()["_id"] == "nightly"
    assert datetime.fromisoformat(created.json()["next_fire_at"]).tzinfo is not None

    listed = api.reader.get("/v1/schedules", params={"owner": "team-a"}).json()
    assert [s["_id"] for s in listed["items"]] == ["nightly"]
    assert listed["next_offset"] is None

    changed = api.admin.patch("/v1/schedules/nightly", json={"cron": "0 3 * * *"})
    assert changed.json()["cron"] == "0 3 * * *"
    assert api.admin.post("/v1/schedules/nightly/pause").json()["state"] == "paused"
    assert api.admin.post("/v1/schedules/nightly/unpause").json()["state"] == "active"

    upcoming = api.reader.get("/v1/schedules/nightly/upcoming", params={"days": 3}).json()
    times = [datetime.fromisoformat(r["fire_at"]) for r in upcoming["items"]]
    assert len(times) == 3 and all(t.hour == 3 and t.minute == 0 for t in times)
    by_owner = api.reader.get("/v1/upcoming", params={"owner": "team-a", "days": 3}).json()
    assert {r["schedule_id"] for r in by_owner["items"]} == {"nightly"}

    assert api.admin.post("/v1/schedules/nightly/stop").json()["state"] == "stopped"
    assert api.admin.delete("/v1/schedules/nightly").json()["state"] == "deleted"
    assert "nightly" not in [s["_id"] for s in api.reader.get("/v1/schedules").json()["items"]]
    every = api.reader.get("/v1/schedules", params={"include_deleted": True}).json()["items"]
    assert "nightly" in [s["_id"] for s in every]


def test_schedule_errors(api):
    problem(api.admin.post("/v1/schedules", json={"id": "x", "cron": "not cron"}), 400)
    problem(api.admin.post("/v1/schedules", json={"id": "x", "colour": "red"}), 422)
    api.admin.post(
        "/v1/schedules", json={"id": "dup", "interval_s": 60, "collections": ["websites"]}
    )
    assert (
        "exists"
        in problem(
            api.admin.post(
                "/v1/schedules", json={"id": "dup", "interval_s": 60, "collections": ["websites"]}
            ),
            409,  # a conflict with what the store holds, not a malformed request
        )["detail"]
    )
    problem(api.reader.get("/v1/schedules/nope"), 404)
    problem(api.admin.patch("/v1/schedules/dup", json={}), 400)
    problem(api.reader.get("/v1/schedules/dup/upcoming", params={"days": 99}), 422)
    errors = problem(api.reader.get("/v1/schedules", params={"limit": 0}), 422)["errors"]
    assert errors[0]["location"] == "query.limit"


def test_idempotency_key_replays_the_first_answer_and_refuses_reuse(api):
    key = {"Idempotency-Key": "create-hourly-1"}
    body = {"id": "hourly", "interval_s": 3600, "collections": ["websites"]}
    first = api.admin.post("/v1/schedules", json=body, headers=key)
    again = api.admin.post("/v1/schedules", json=body, headers=key)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    # Without the key, the same request is a second create: refused, nothing doubled.
    problem(api.admin.post("/v1/schedules", json=body), 409)
    other = api.admin.post(
        "/v1/schedules",
        json={"id": "other", "interval_s": 60, "collections": ["websites"]},
        headers=key,
    )
    assert problem(other, 422)["type"].endswith("idempotency-key-reused")
    assert api.runtime.schedules.get("other") is None
    # A failed request frees its key: the corrected retry goes through.
    bad = {"Idempotency-Key": "k2"}
    problem(api.admin.post("/v1/schedules", json={"id": "y", "cron": "bad"}, headers=bad), 400)
    fixed = api.admin.post("/v1/schedules", json={"id": "y", "cron": "bad"}, headers=bad)
    problem(fixed, 400)  # same body, same answer: the key was freed, the error repeats


def test_jobs_add_find_meta(api):
    added = api.admin.post(
        "/v1/jobs",
        json={"kind": "website", "media": "web", "target": "https://example.com/"},
        headers={"Idempotency-Key": "site-1"},
    )
    assert added.status_code == 201, added.text
    job = added.json()["jobs"][0]
    assert (job["collection"], job["state"], job["task"]) == ("websites", "pending", "article")
    replay = api.admin.post(
        "/v1/jobs",
        json={"kind": "website", "media": "web", "target": "https://example.com/"},
        headers={"Idempotency-Key": "site-1"},
    )
    assert replay.json() == added.json()
    assert api.runtime.db.websites.count_documents({}) == 1

    page = api.reader.get("/v1/jobs/websites", params={"state": "pending"}).json()
    assert [j["job_id"] for j in page["items"]] == [job["job_id"]]
    assert api.reader.get("/v1/jobs/websites", params={"state": "done"}).json()["items"] == []
    by_id = api.reader.get("/v1/jobs/websites", params={"ids": [job["job_id"]]}).json()
    assert len(by_id["items"]) == 1
    one = api.reader.get(f"/v1/jobs/websites/{job['job_id']}").json()
    assert one["target"] == "https://example.com/"

    meta = api.admin.patch(
        f"/v1/jobs/websites/{job['job_id']}/meta", json={"meta": {"team": "news", "x": 1}}
    ).json()
    assert meta["meta"] == {"team": "news", "x": 1}
    removed = api.admin.patch(
        f"/v1/jobs/websites/{job['job_id']}/meta", json={"meta": {"x": None}}
    ).json()
    assert removed["meta"] == {"team": "news"}


def test_a_website_added_through_the_api_keeps_its_own_bounds_and_pagination(api):
    # Given a website job with its own depth, page budget and pagination, as the CLI takes them
    body = {
        "kind": "website",
        "media": "web",
        "target": "https://example.org/news/",
        "max_depth": 2,
        "max_pages": 40,
        "pagination": "page_param",
        "page_param": "p",
    }
    added = api.admin.post("/v1/jobs", json=body)
    assert added.status_code == 201, added.text
    # Then the stored job carries them, and the job's view shows them
    stored = api.runtime.db.websites.find_one({"target": "https://example.org/news/"})
    assert (stored["max_depth"], stored["max_pages"]) == (2, 40)
    assert (stored["pagination"], stored["page_param"]) == ("page_param", "p")
    view = api.reader.get(f"/v1/jobs/websites/{added.json()['jobs'][0]['job_id']}").json()
    assert (view["max_depth"], view["max_pages"], view["page_param"]) == (2, 40, "p")
    # And what only a website takes, or takes only together, is refused with nothing stored
    profile = {"kind": "profile", "media": "twitter", "target": "alice", "max_depth": 2}
    assert "only a website" in problem(api.admin.post("/v1/jobs", json=profile), 400)["detail"]
    alone = {**body, "target": "https://example.org/b/", "pagination": "next_link"}
    assert "page_param" in problem(api.admin.post("/v1/jobs", json=alone), 400)["detail"]
    problem(api.admin.post("/v1/jobs", json={**body, "max_depth": -1}), 422)
    assert api.runtime.db.profiles.count_documents({"target": "alice"}) == 0
    assert api.runtime.db.websites.count_documents({"target": "https://example.org/b/"}) == 0


def test_job_errors(api):
    problem(
        api.admin.post("/v1/jobs", json={"kind": "website", "media": "nope", "target": "x"}), 400
    )
    problem(
        api.admin.post(
            "/v1/jobs", json={"kind": "website", "media": "web", "target": "http://10.0.0.1/"}
        ),
        400,
    )
    problem(api.reader.get("/v1/jobs/nope"), 422)  # the schema lists the collections
    problem(api.reader.get("/v1/jobs/websites", params={"state": "sleeping"}), 422)
    problem(api.reader.get("/v1/jobs/websites/not-an-id"), 422)  # the schema says what an id is
    problem(api.reader.get(f"/v1/jobs/websites/oid:{ObjectId()}"), 404)
    problem(
        api.admin.patch(f"/v1/jobs/websites/oid:{ObjectId()}/meta", json={"meta": {"a": 1}}), 404
    )
    problem(
        api.admin.patch(f"/v1/jobs/websites/oid:{ObjectId()}/meta", json={"meta": {"a.b": 1}}), 400
    )


def _history_rows(rt: Runtime) -> list[ObjectId]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [
        {
            "_id": ObjectId(),
            "schedule_id": "sweep-websites",
            "run_id": "sweep-websites@20260101T000000Z",
            "job_id": f"oid:{ObjectId()}",
            "outcome": outcome,
            "started_at": start + timedelta(seconds=i),
            "ended_at": start + timedelta(seconds=i + 1),
        }
        for i, outcome in enumerate(["succeeded", "failed", "failed"])
    ]
    rt.history.add(rows)
    return [r["_id"] for r in rows]


def test_history_and_its_three_corrections(api):
    ids = _history_rows(api.runtime)
    page = api.reader.get("/v1/history", params={"schedule_id": "sweep-websites"}).json()
    assert [r["_id"] for r in page["items"]] == [str(i) for i in reversed(ids)]
    assert api.reader.get(f"/v1/history/{ids[0]}").json()["outcome"] == "succeeded"

    one = api.admin.patch(f"/v1/history/{ids[0]}", json={"note": "checked", "reason": "audit"})
    assert one.json() == {"corrected": 1, "set": {"note": "checked"}}
    several = api.admin.post(
        "/v1/history/corrections",
        json={"rows": [str(ids[1])], "outcome": "succeeded", "reason": "site was up"},
    )
    assert several.json()["corrected"] == 1
    by_status = api.admin.post(
        "/v1/history/corrections",
        json={"status": "failed", "error": "proxy outage", "reason": "known incident"},
    )
    assert by_status.json()["corrected"] == 1
    row = api.reader.get(f"/v1/history/{ids[2]}").json()
    assert row["error"] == "proxy outage"
    assert row["corrections"][0]["reason"] == "known incident"

    problem(
        api.admin.post("/v1/history/corrections", json={"outcome": "failed", "reason": "r"}), 422
    )
    problem(api.admin.patch(f"/v1/history/{ids[0]}", json={"reason": "nothing set"}), 400)
    problem(api.admin.patch(f"/v1/history/{ids[0]}", json={"outcome": "great", "reason": "r"}), 400)
    problem(api.admin.patch(f"/v1/history/{ObjectId()}", json={"note": "n", "reason": "r"}), 404)
    problem(api.reader.get("/v1/history/zzz"), 404)  # no route: a row id is 24 hex digits


def test_runs_listing_and_one_run(api):
    rt = api.runtime
    fire_at = datetime(2026, 1, 1, tzinfo=UTC)
    rt.runs.open("sweep-websites@20260101T000000Z", "sweep-websites", fire_at, fire_at)
    listed = api.reader.get("/v1/runs", params={"schedule_id": "sweep-websites"}).json()
    assert [r["_id"] for r in listed["items"]] == ["sweep-websites@20260101T000000Z"]
    one = api.reader.get("/v1/runs/sweep-websites@20260101T000000Z").json()
    assert one["waiting"] == {"batches": 0, "jobs": 0}
    assert one["by_depth"][0]["depth"] == 0
    children = api.reader.get("/v1/runs/sweep-websites@20260101T000000Z/children").json()
    assert children["items"] == []
    history = api.reader.get("/v1/runs/sweep-websites@20260101T000000Z/history").json()
    assert history["items"] == []
    problem(api.reader.get("/v1/runs/nope"), 404)
    problem(api.admin.post("/v1/runs/nope/stop"), 404)


def test_starting_or_stopping_runs_needs_a_broker_that_delivers(api):
    # This server's broker reaches no worker: it says so instead of dropping the message.
    body = problem(api.admin.post("/v1/runs", json={"schedule_id": "sweep-websites"}), 503)
    assert "broker" in body["detail"]
    problem(api.admin.post("/v1/runs", json={"schedule_id": "nope"}), 404)


def test_pools_accounts_nodes_stats_activity(api):
    rt = api.runtime
    rt.inventory.add_account("twitter", "alice", "s3cret", AccountLimits(2), rt.now())
    rt.inventory.add_node("http://127.0.0.1:4444", "chromedriver", 3, rt.now())
    accounts = api.reader.get("/v1/accounts").json()["items"]
    assert accounts == [
        {
            "media": "twitter",
            "username": "alice",
            "state": "active",
            "held": 0,
            "max_concurrent": 2,
            "cooling_until": None,
            "reason": None,
            "last_leased_at": None,
        }
    ]
    assert "s3cret" not in api.reader.get("/v1/accounts").text
    nodes = api.reader.get("/v1/nodes").json()["items"]
    assert nodes[0]["url"] == "http://127.0.0.1:4444" and nodes[0]["capacity"] == 3
    pools = api.reader.get("/v1/pools").json()
    assert pools["pools"]["account"]["capacity"] == 2
    assert pools["waiting_batches"] == 0
    stats = api.reader.get("/v1/stats").json()
    no_jobs = dict.fromkeys(("pending", "running", "failed", "done", "other"), 0)
    assert stats["jobs_by_state"] == {"profiles": no_jobs, "websites": no_jobs}
    assert stats["pages_seen"] == {"profiles": 0, "websites": 0}
    api.admin.post(
        "/v1/schedules", json={"id": "s1", "interval_s": 60, "collections": ["websites"]}
    )
    events = api.reader.get("/v1/activity").json()["items"]
    assert events[0]["event"] == "ScheduleCreated"


def test_pagination_walks_every_item_once(api):
    for i in range(7):
        api.admin.post(
            "/v1/schedules", json={"id": f"s{i}", "interval_s": 60 + i, "collections": ["websites"]}
        )
    seen, offset = [], 0
    while offset is not None:
        page = api.reader.get("/v1/schedules", params={"limit": 3, "offset": offset}).json()
        assert len(page["items"]) <= 3
        seen += [s["_id"] for s in page["items"]]
        offset = page["next_offset"]
    assert sorted(seen) == sorted({*seen}) and len(seen) == 9  # 7 + the two default sweeps


def test_missed_runs_routes(api):
    rt = api.runtime
    api.admin.post(
        "/v1/schedules",
        json={"id": "m", "interval_s": 60, "owner": "o", "collections": ["websites"]},
    )
    late = rt.now() - timedelta(hours=1)
    rt.missed_runs.record(rt.schedules.get("m"), [(late, "paused")], rt.now())
    one = api.reader.get("/v1/schedules/m/missed").json()["items"]
    assert [(r["schedule_id"], r["reason"]) for r in one] == [("m", "paused")]
    every = api.reader.get("/v1/missed-runs", params={"owner": "o"}).json()["items"]
    assert len(every) == 1
    problem(api.reader.get("/v1/schedules/zz/missed"), 404)
