"""`crawlsched schedules …` on the embedded store: operations, events, upcoming and missed runs,
bad input refused in one line with nothing stored; target sets; one broken schedule never
stops the others."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from structlog.testing import capture_logs
from typer.testing import CliRunner, Result

from crawlsched.cli import app
from crawlsched.flow import schedule_ops
from crawlsched.flow.planning import plan_run
from crawlsched.flow.ticking import fire_due
from crawlsched.runtime import Runtime
from crawlsched.schedules.triggers import CronTrigger
from crawlsched.settings import Settings
from crawlsched.store.client import drop_embedded
from tests.support.workers import TEST_SECRET_KEY

Invoke = Callable[..., Result]


@pytest.fixture
def url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"mongomock://cli-schedules-{uuid.uuid4().hex}"
    monkeypatch.setenv("CRAWLSCHED_MONGO_URL", url)
    yield url
    drop_embedded(url)


@pytest.fixture
def invoke(url: str) -> Invoke:
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(app, list(args))

    assert run("init-db").exit_code == 0
    return run


def runtime() -> Runtime:
    return Runtime(Settings())


def future(hours: int = 1) -> str:
    return (datetime.now(UTC) + timedelta(hours=hours)).isoformat()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--cron", "61 * * * *"], "cron"),
        (["--cron", "* * *"], "cron"),
        (["--cron", "0 3 * * *", "--tz", "Europe/Atlantis"], "timezone"),
        (["--every", "0"], "--every"),
        (["--every", "-5"], "--every"),
        (["--every", "nan"], "--every"),
        (["--every", "inf"], "--every"),
        (["--at", "2001-01-01T00:00:00+00:00"], "at"),
        (["--at", "2999-01-01T00:00:00"], "at"),  # no time zone
        (["--at", "tomorrow"], "at"),
        (["--every", "60", "--cron", "0 * * * *"], "trigger"),
        ([], "trigger"),
        (["--every", "60", "--tz", "UTC"], "timezone"),
        (["--every", "60", "--misfire", "sometimes"], "misfire"),
        (["--every", "60", "--overlap", "maybe"], "overlap"),
        (["--every", "60", "--catch-up-limit", "-1"], "catch_up_limit"),
        (["--every", "60", "--shards", "0"], "shards"),
        (["--every", "60", "--shards", "65"], "shards"),
        (["--every", "60", "--webhook", "ftp://hooks.example/x"], "webhook"),
        (["--every", "60", "--webhook", "https://user:pw@hooks.example/x"], "webhook"),
        (["--every", "60", "--webhook", "https:///no-host"], "webhook"),
        (
            ["--every", "60", "--webhook", "https://h.example/x", "--notify-on", "begun"],
            "notify_on",
        ),
    ],
)
def test_schedules_add_refuses_bad_input_in_one_line_and_stores_nothing(invoke, args, field):
    result = invoke("schedules", "add", "s1", "--collection", "websites", *args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and f"error: {field}:" in lines[0], result.output
    rt = runtime()
    assert rt.schedules.get("s1") is None
    assert rt.db.activity.count_documents({}) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--collection", "tweets"], "collections: unknown"),
        (["--target", "x"], "target_collection"),
        (["--target-collection", "websites", "--target", " "], "targets"),
    ],
)
def test_schedules_add_refuses_bad_targets(invoke, args, message):
    result = invoke("schedules", "add", "s1", "--every", "60", *args)
    assert result.exit_code == 2 and message in result.output, result.output
    assert runtime().schedules.get("s1") is None


def test_schedule_life_emits_each_event_and_refuses_changes_once_deleted(invoke):
    steps = [
        ("add", "--cron", "0 6 * * 1-5", "--tz", "Asia/Kolkata", "--collection", "profiles"),
        ("pause",),
        ("unpause",),
        ("update", "--every", "600", "--owner", "team-a"),
        ("stop",),
        ("delete",),
    ]
    for command, *rest in steps:
        result = invoke("schedules", command, "daily", *rest, "--json")
        assert result.exit_code == 0, (command, result.output)
        assert json.loads(result.output)["_id"] == "daily"
    events = [e["event"] for e in runtime().db.activity.find({}).sort("at", 1)]
    assert events == [
        "ScheduleCreated",
        "SchedulePaused",
        "ScheduleUnpaused",
        "ScheduleUpdated",
        "ScheduleStopped",
        "ScheduleDeleted",
    ]
    before = runtime().schedules.get("daily")
    for command, *rest in [("update", "--every", "5"), ("pause",), ("unpause",), ("stop",)]:
        result = invoke("schedules", command, "daily", *rest)
        assert result.exit_code == 2
        assert result.output.strip() == f"error: schedule 'daily' is deleted: cannot {command} it"
    assert runtime().schedules.get("daily") == before
    assert "daily" not in invoke("schedules", "list").output
    assert invoke("schedules", "update", "ghost", "--every", "5").exit_code == 2


def test_update_of_a_trigger_restarts_it_and_other_fields_keep_the_next_fire_time(invoke):
    assert (
        invoke("schedules", "add", "s", "--every", "3600", "--collection", "websites").exit_code
        == 0
    )
    first = runtime().schedules.get("s")
    assert invoke("schedules", "update", "s", "--owner", "ops").exit_code == 0
    kept = runtime().schedules.get("s")
    assert (kept["owner"], kept["next_fire_at"]) == ("ops", first["next_fire_at"])
    assert invoke("schedules", "update", "s", "--cron", "*/5 * * * *").exit_code == 0
    moved = runtime().schedules.get("s")
    assert moved["trigger"] == "cron" and moved.get("interval_s") is None
    assert moved["next_fire_at"] - datetime.now(UTC) <= timedelta(minutes=5)
    bad = invoke("schedules", "update", "s", "--tz", "Nowhere/Here")
    assert bad.exit_code == 2 and "timezone" in bad.output
    assert runtime().schedules.get("s") == moved


def test_next_lists_three_days_of_fire_times_per_owner(invoke):
    invoke("schedules", "add", "a", "--cron", "0 */6 * * *", "--tz", "Europe/Paris",
           "--collection", "websites", "--owner", "ana")  # fmt: skip
    invoke("schedules", "add", "b", "--cron", "0 */6 * * *", "--tz", "Europe/Paris",
           "--collection", "profiles", "--owner", "ana")  # fmt: skip
    invoke("schedules", "add", "c", "--every", "60", "--collection", "profiles", "--owner", "bo")
    result = invoke("schedules", "next", "--owner", "ana", "--json", "--limit", "1000")
    rows = [json.loads(line) for line in result.output.splitlines()]
    times = [datetime.fromisoformat(r["fire_at"]) for r in rows if r["schedule_id"] == "a"]
    now = datetime.now(UTC)
    expected = list(
        CronTrigger("0 */6 * * *", "Europe/Paris").times_between(now, now + timedelta(days=3))
    )
    assert times == expected and len(times) == 12
    assert {r["schedule_id"] for r in rows} == {"a", "b"}
    fire_times = [r["fire_at"] for r in rows]
    assert fire_times == sorted(fire_times)
    one = invoke("schedules", "next", "c", "--days", "1", "--json", "--limit", "100000")
    assert len(one.output.splitlines()) in (1439, 1440)


def test_missed_lists_the_fire_times_of_a_pause(url):
    clock = {"now": datetime(2026, 5, 1, tzinfo=UTC)}
    rt = Runtime(Settings(), clock=lambda: clock["now"])
    rt.create_indexes()
    schedule_ops.create(rt, "hourly", {"interval_s": 3600, "collections": ["websites"]})
    schedule_ops.pause(rt, "hourly")
    clock["now"] += timedelta(hours=5, minutes=30)
    schedule_ops.unpause(rt, "hourly")
    result = CliRunner().invoke(app, ["schedules", "missed", "hourly", "--json"])
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [r["reason"] for r in rows] == ["paused"] * 5
    assert rt.schedules.get("hourly")["next_fire_at"] == datetime(2026, 5, 1, 6, tzinfo=UTC)


def _website_jobs(rt: Runtime, targets: list[str]) -> None:
    web = rt.reference.media_by_name("web")
    now = rt.now()
    rt.jobs("websites").insert_new(
        [
            {
                "target": target,
                "media_name": "web",
                "media_name_id": web["_id"],
                "task": "article",
                "state": 1,
                "enabled": True,
                "execution_date": now - timedelta(seconds=1),
                "modified_at": now,
                "attempt_count": 0,
            }
            for target in targets
        ]
    )


def test_a_target_set_plans_only_its_targets_at_any_fire_time_without_moving_the_schedule(
    invoke,
):
    # Given four due website jobs and a schedule over two of them
    rt = runtime()
    _website_jobs(rt, [f"https://site{i}.example/" for i in range(4)])
    result = invoke(
        "schedules", "add", "two-sites", "--every", "86400",
        "--target-collection", "websites",
        "--target", "https://site1.example/", "--target", "https://site3.example/",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    before = rt.schedules.get("two-sites")
    # When it is planned at a fire time of our choosing (a "run now")
    dispatched = []
    fire_at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    run = plan_run(rt, "two-sites", fire_at, dispatched.append)
    # Then only those two targets' jobs were claimed, and the schedule did not move
    assert run["planned"] == 2
    claimed = rt.db.websites.find({"state": 2}, {"target": 1})
    assert sorted(j["target"] for j in claimed) == [
        "https://site1.example/",
        "https://site3.example/",
    ]
    assert sum(len(m.job_ids) for m in dispatched) == 2
    assert rt.schedules.get("two-sites") == before


def test_a_broken_schedule_is_logged_with_its_id_and_the_others_still_fire(url):
    rt = runtime()
    rt.create_indexes()
    past = rt.now() - timedelta(seconds=1)
    schedule_ops.create(rt, "good", {"interval_s": 60, "collections": ["websites"]})
    rt.db.schedules.update_one({"_id": "good"}, {"$set": {"next_fire_at": past}})
    # A document no operation would write (edited by hand): its cron cannot be read
    rt.db.schedules.insert_one(
        {"_id": "broken", "trigger": "cron", "cron": "not a cron", "enabled": True,
         "next_fire_at": past - timedelta(seconds=1), "collections": ["websites"]}
    )  # fmt: skip
    sent = []
    with capture_logs() as logs:
        fired = fire_due(rt, lambda sid, at: sent.append(sid))
    assert (fired, sent) == (1, ["good"])
    failures = [e for e in logs if e["event"] == "schedule_fire_failed"]
    assert [e["schedule_id"] for e in failures] == ["broken"]


def test_shards_and_a_webhook_are_set_at_add_changed_by_update_and_removed(invoke, monkeypatch):
    # Given a schedule added with shards and a webhook told of failures only (webhook URLs are
    # sealed with the secret key)
    monkeypatch.setenv("CRAWLSCHED_SECRET_KEY", TEST_SECRET_KEY)
    added = invoke(
        "schedules", "add", "sharded", "--every", "600", "--collection", "websites",
        "--shards", "4", "--webhook", "https://hooks.example/crawl", "--notify-on", "failed",
        "--json",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    doc = runtime().schedules.get("sharded")
    assert doc["shards"] == 4
    assert doc["notify"]["on"] == ["failed"]
    assert doc["notify"]["webhook"]["shown"] == "https://hooks.example"
    assert "hooks.example/crawl" not in repr(doc)  # sealed
    assert json.loads(added.stdout)["notify"]["webhook"] == "https://hooks.example"
    # When an update changes only the shards, the webhook stays
    assert invoke("schedules", "update", "sharded", "--shards", "2").exit_code == 0
    doc = runtime().schedules.get("sharded")
    assert doc["shards"] == 2 and doc["notify"]["on"] == ["failed"]
    # And an empty webhook removes it
    assert invoke("schedules", "update", "sharded", "--webhook", "").exit_code == 0
    assert runtime().schedules.get("sharded")["notify"] is None
    # A bad value in an update changes nothing
    bad = invoke("schedules", "update", "sharded", "--shards", "100")
    assert bad.exit_code == 2 and "shards:" in bad.output
    assert runtime().schedules.get("sharded")["shards"] == 2
