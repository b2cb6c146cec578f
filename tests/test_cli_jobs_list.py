"""`crawlsched jobs list` and `jobs remove`: find jobs by state, task or target; delete one no
crawl holds, and refuse one being crawled (its run waits for a report about it)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from tests.support.cli_store import Invoke, cli_on_fresh_store


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Invoke, Runtime]]:
    with cli_on_fresh_store(monkeypatch, "cli-jobs-list") as (run, url):
        rt = Runtime(Settings(mongo_url=url, broker_url="stub://"))
        rt.db.websites.insert_many(
            [
                {"_id": "a", "target": "https://a.test/", "task": "article", "state": 1},
                {"_id": "b", "target": "https://b.test/", "task": "comment", "state": 3},
                {"_id": "c", "target": "https://c.test/", "task": "article", "state": 2,
                 "dispatch_id": "d1", "run_id": "sweep@1"},
            ]
        )  # fmt: skip
        yield run, rt


def _listed(run: Invoke, *filters: str) -> list[str]:
    result = run("jobs", "list", "websites", "--json", *filters)
    assert result.exit_code == 0, result.output
    return [json.loads(line)["job_id"] for line in result.stdout.splitlines()]


def test_jobs_are_listed_and_filtered(setup):
    run, _ = setup
    assert _listed(run) == ["str:a", "str:b", "str:c"]
    assert _listed(run, "--state", "failed") == ["str:b"]
    assert _listed(run, "--task", "article") == ["str:a", "str:c"]
    assert _listed(run, "--target", "https://c.test/") == ["str:c"]
    assert _listed(run, "--limit", "1", "--skip", "1") == ["str:b"]
    table = run("jobs", "list", "websites")
    assert table.exit_code == 0 and "https://a.test/" in table.stdout


def test_a_job_no_crawl_holds_is_removed_and_one_being_crawled_is_refused(setup):
    run, rt = setup
    removed = run("jobs", "remove", "websites", "str:a")
    assert removed.exit_code == 0, removed.output
    assert rt.db.websites.find_one({"_id": "a"}) is None
    refused = run("jobs", "remove", "websites", "str:c")
    assert refused.exit_code == 2
    assert "being crawled (run sweep@1)" in " ".join(refused.stderr.split())
    assert rt.db.websites.find_one({"_id": "c"}) is not None  # still there


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("jobs", "remove", "websites", "str:nope"), "no job 'str:nope' in websites"),
        (("jobs", "remove", "nowhere", "str:a"), "unknown job collection"),
        (("jobs", "list", "websites", "--state", "sleeping"), "unknown job state"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(setup, args, message):
    run, rt = setup
    result = run(*args)
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split())
    assert rt.db.websites.count_documents({}) == 3
