"""`crawlsched run now|stop|status|children|history|correct`, `activity`, `stats`: bad input
gives one line and exit code 2 with nothing changed; the rest on a small seeded store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from typer.testing import Result

from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from tests.support.cli_store import Invoke, cli_on_fresh_store
from tests.support.rabbit import queue_depth
from tests.support.workers import TEST_SIGNING_KEY

RUN = "sweep-profiles@20261123T080000Z"


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Iterator[Invoke]:
    with cli_on_fresh_store(monkeypatch, "cli-runs") as (run, _):
        yield run


def _seed(rt: Runtime) -> None:
    """A running parent with two children, and history rows of one job."""
    now = rt.now()
    fire_at = now - timedelta(minutes=1)
    rt.runs.open(RUN, "sweep-profiles", fire_at, now)
    rt.runs.close_planning(RUN, 4, {}, now, children=2)
    for n in (1, 2):
        child = f"{RUN}/{n}"
        rt.runs.open(child, "sweep-profiles", fire_at, now, parent_id=RUN)
        rt.runs.close_planning(child, 2, {}, now)
    rows = [
        {
            "run_id": f"{RUN}/1",
            "schedule_id": "sweep-profiles",
            "job_id": "str:job-1",
            "started_at": now - timedelta(seconds=s + 1),
            "ended_at": now - timedelta(seconds=s),
            "outcome": outcome,
            "error": None,
            "items_stored": 1,
            "account": "acct0",
            "node": None,
        }
        for s, outcome in ((1, "failed"), (2, "failed"), (3, "succeeded"))
    ]
    rt.history.add(rows)


def one_line(result: Result) -> str:
    return " ".join(result.output.split())


MISSING_ROW = "6b0745000000000000000000"  # fixed: a test id must not change between collections
BAD_INPUT = [
    (("run", "now", "no-such-schedule"), "no schedule 'no-such-schedule'"),
    (("run", "now", "sweep-profiles"), "set CRAWLSCHED_BROKER_URL=amqp://"),
    (("run", "stop", "no-such-run"), "no run with id 'no-such-run'"),
    (("run", "stop", RUN, "--task", "profile", "--children"), "not both"),
    (("run", "status", "no-such-run"), "no run with id 'no-such-run'"),
    (("run", "children", "no-such-run"), "no run with id 'no-such-run'"),
    (("run", "resources", "no-such-run"), "no run with id 'no-such-run'"),
    (("run", "history", "--schedule", "nope"), "no schedule 'nope'"),
    (("run", "history", "--job", "nope"), "no task history for job 'nope'"),
    (("run", "history"), "exactly one of --schedule, --job or --run"),
    (("run", "history", "--schedule", "a", "--job", "b"), "exactly one of"),
    (("run", "correct", "--row", "xyz", "--note", "n", "--reason", "r"), "not a history row"),
    (
        ("run", "correct", "--row", MISSING_ROW, "--note", "n", "--reason", "r"),
        f"no history row {MISSING_ROW}; nothing corrected",
    ),
    (("run", "correct", "--status", "bogus", "--note", "n", "--reason", "r"), "unknown outcome"),
    (("run", "correct", "--status", "failed", "--reason", "r"), "nothing to correct"),
    (("run", "correct", "--note", "n", "--reason", "r"), "give --row (one or more) or --status"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUT)
def test_run_commands_reject_bad_input_in_one_line_exit_2_and_change_nothing(
    invoke: Invoke, args, message
):
    rt = Runtime(Settings())
    _seed(rt)
    before = (list(rt.db.runs.find({})), list(rt.db.task_history.find({})))
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert message in one_line(result), result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "Traceback" not in result.output
    assert (list(rt.db.runs.find({})), list(rt.db.task_history.find({}))) == before
    assert rt.db.activity.count_documents({}) == 0


def test_run_stop_children_then_refuses_an_ended_run(invoke: Invoke):
    rt = Runtime(Settings())
    _seed(rt)
    # The children have jobs outstanding (crawls still running): they are flagged, not ended
    stopped = invoke("run", "stop", RUN, "--children", "--json")
    assert stopped.exit_code == 0, stopped.output
    assert json.loads(stopped.stdout)["stopping"] == [f"{RUN}/1", f"{RUN}/2"]
    status = json.loads(invoke("run", "status", RUN, "--json").output)
    assert [c["_id"] for c in status["child_runs"]] == [f"{RUN}/1", f"{RUN}/2"]
    assert not status.get("stop_requested")
    children = [
        json.loads(line) for line in invoke("run", "children", RUN, "--json").output.splitlines()
    ]
    assert all(c["stop_requested"] for c in children)

    # When both children's crawls report their jobs stopped, the children and the parent end
    for n in (1, 2):
        rt.runs.report(f"{RUN}/{n}", f"d{n}:crawl", {"stopped": 2})
        from crawlsched.flow.coordination import finish_if_done

        finish_if_done(rt, rt.runs.get(f"{RUN}/{n}"))
    assert rt.runs.get(RUN)["state"] == "finished"
    again = invoke("run", "stop", RUN)
    assert again.exit_code == 2 and "has already ended (finished)" in one_line(again)
    text = invoke("run", "status", f"{RUN}/1").output
    assert "stop requested: the whole run" in " ".join(text.split())


def test_history_listing_and_corrections_by_status_keep_an_audit_trail(invoke: Invoke):
    rt = Runtime(Settings())
    _seed(rt)
    listed = invoke("run", "history", "--job", "job-1", "--json")
    rows = [json.loads(line) for line in listed.output.splitlines()]
    assert [r["outcome"] for r in rows] == ["failed", "failed", "succeeded"]  # newest first
    assert invoke("run", "history", "--schedule", "sweep-profiles").exit_code == 0

    fixed = invoke(
        "run", "correct", "--status", "failed", "--outcome", "succeeded", "--reason", "site ok",
        "--json",
    )  # fmt: skip
    assert json.loads(fixed.output)["corrected"] == 2
    one = invoke("run", "correct", "--row", rows[2]["_id"], "--note", "checked", "--reason", "qa")
    assert one.exit_code == 0, one.output
    after = rt.history.for_job("str:job-1")
    assert {r["outcome"] for r in after} == {"succeeded"}
    assert [c["reason"] for r in after for c in r.get("corrections", [])] == [
        "site ok",
        "site ok",
        "qa",
    ]


def test_activity_and_stats(invoke: Invoke):
    from crawlsched.events import emit

    rt = Runtime(Settings())
    _seed(rt)
    emit(rt, "ScheduleCreated", schedule_id="s1")
    emit(rt, "RunStarted", run_id=RUN)
    feed = [json.loads(line) for line in invoke("activity", "--json").output.splitlines()]
    assert [e["event"] for e in feed] == ["RunStarted", "ScheduleCreated"]
    only = invoke("activity", "--run", RUN, "--json").output.splitlines()
    assert len(only) == 1
    stats = json.loads(invoke("stats", "--json").output)
    assert stats["runs_by_state"] == {"running": 3}
    assert stats["executions_by_outcome"] == {"failed": 2, "succeeded": 1}
    assert stats["events_by_name"] == {"ScheduleCreated": 1, "RunStarted": 1}


@pytest.mark.rabbitmq
def test_run_now_sends_a_plan_and_does_not_move_the_schedule(
    invoke: Invoke, rabbitmq_url, monkeypatch: pytest.MonkeyPatch
):
    rt = Runtime(Settings())
    before = rt.schedules.get("sweep-websites")["next_fire_at"]
    monkeypatch.setenv("CRAWLSCHED_BROKER_URL", rabbitmq_url)
    monkeypatch.setenv("CRAWLSCHED_MESSAGE_SIGNING_KEY", TEST_SIGNING_KEY)
    depth = queue_depth(rabbitmq_url, "crawlsched.plan")
    result = invoke("run", "now", "sweep-websites", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["run_id"].startswith("sweep-websites@")
    assert queue_depth(rabbitmq_url, "crawlsched.plan") == depth + 1
    assert rt.schedules.get("sweep-websites")["next_fire_at"] == before
