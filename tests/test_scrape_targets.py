"""Scrape targets as the dispatcher kept them (`frequency`, `last_scheduled`, `attempt_count`):
imported as they are, and a target-set schedule over them claims only the due ones."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from crawlsched.cli import app
from crawlsched.flow import schedule_ops
from crawlsched.flow.planning import plan_run
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from crawlsched.store.client import drop_embedded


@pytest.fixture
def store():
    """(url, env, runner) of a fresh embedded store after init-db."""
    url = f"mongomock://scrape-{uuid.uuid4().hex}"
    env = {"CRAWLSCHED_MONGO_URL": url}
    runner = CliRunner()
    assert runner.invoke(app, ["init-db"], env=env).exit_code == 0
    yield url, env, runner
    drop_embedded(url)


def test_scrape_targets_due_by_frequency_are_the_only_ones_a_target_set_plans(tmp_path, store):
    url, env, runner = store
    now = datetime.now(UTC)
    # Given five targets: due when last_scheduled + frequency <= now
    rows = [
        ("https://a.example/", 3600, now - timedelta(hours=2)),  # due an hour ago
        ("https://b.example/", 3600, now - timedelta(minutes=10)),  # due in 50 minutes
        ("https://c.example/", 60, now - timedelta(minutes=5)),  # due
        ("https://d.example/", 86400, now - timedelta(hours=1)),  # due tomorrow
        ("https://e.example/", 60, now - timedelta(hours=1)),  # due, but not in the set
    ]
    dump = tmp_path / "targets.jsonl"
    dump.write_text(
        "".join(
            json.dumps(
                {
                    "media_name": "web",
                    "task": "article",
                    "target": target,
                    "frequency": frequency,
                    "last_scheduled": last.isoformat(),
                    "attempt_count": 2,
                    "state": 1,
                }
            )
            + "\n"
            for target, frequency, last in rows
        )
    )
    result = runner.invoke(
        app, ["jobs", "import", "--preserve", "--kind", "website", str(dump)], env=env
    )
    assert result.exit_code == 0, result.output
    rt = Runtime(Settings(mongo_url=url))
    # When a target set over four of them is planned
    schedule_ops.create(
        rt,
        "dispatcher",
        {
            "interval_s": 60,
            "target_collection": "websites",
            "targets": [r[0] for r in rows[:4]],
        },
    )
    run = plan_run(rt, "dispatcher", now, lambda message: None)
    # Then only the due ones of the set are claimed, attempts kept, frequency as interval
    claimed = {j["target"]: j for j in rt.db.websites.find({"run_id": run["_id"]})}
    assert sorted(claimed) == ["https://a.example/", "https://c.example/"]
    assert {j["attempt_count"] for j in claimed.values()} == {2}
    assert claimed["https://a.example/"]["interval_s"] == 3600
    assert isinstance(claimed["https://a.example/"]["last_scheduled"], datetime)


def test_a_bad_frequency_is_refused_naming_the_field(tmp_path, store):
    url, env, runner = store
    dump = tmp_path / "targets.jsonl"
    dump.write_text(
        json.dumps(
            {
                "media_name": "web",
                "task": "article",
                "target": "https://x.example/",
                "frequency": -5,
            }
        )
        + "\n"
    )
    result = runner.invoke(
        app, ["jobs", "import", "--preserve", "--kind", "website", str(dump)], env=env
    )
    assert result.exit_code != 0 and "frequency" in result.output
    assert Runtime(Settings(mongo_url=url)).db.websites.count_documents({}) == 0


def test_a_preserved_row_without_a_state_is_pending_and_planned(tmp_path, store):
    url, env, runner = store
    dump = tmp_path / "targets.jsonl"
    row = {"media_name": "web", "task": "article", "target": "https://nostate.example/"}
    dump.write_text(json.dumps(row) + "\n")
    result = runner.invoke(
        app, ["jobs", "import", "--preserve", "--kind", "website", str(dump)], env=env
    )
    assert result.exit_code == 0, result.output
    rt = Runtime(Settings(mongo_url=url))
    (job,) = rt.db.websites.find({"target": "https://nostate.example/"})
    assert job["state"] == 1  # pending, stored
    schedule_ops.create(
        rt,
        "nostate",
        {"interval_s": 60, "target_collection": "websites", "targets": [row["target"]]},
    )
    run = plan_run(rt, "nostate", datetime.now(UTC), lambda message: None)
    assert rt.db.websites.count_documents({"run_id": run["_id"]}) == 1  # and planned
