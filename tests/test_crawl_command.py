"""`crawlsched crawl URL…` and following a run (`run watch`, `run now --wait`), as a user types
them, each a process of its own: on embedded defaults with no server (keeping nothing), and
through a running standalone (keeping the run there). Judged by the exit code (succeeded 0,
failed 4, stopped 5), the items file, the summary, and what the server or the data directory
holds afterwards."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import pytest

from crawlsched.demo.website import DemoWebsite
from tests.support.standalone import (
    CLI,
    Standalone,
    slow_standalone_env,
    standalone_env,
    website_rows,
)
from tests.support.workers import REPO


def no_server_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLSCHED_")}
    env.update(
        CRAWLSCHED_DATA_DIR=str(data_dir),
        CRAWLSCHED_TARGET_ALLOW_NETWORKS='["127.0.0.1/32"]',
        CRAWLSCHED_HOST_DELAY_S="0",
        PYTHONPATH=str(REPO),
    )
    return env


def crawl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLI, "crawl", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def site():
    with DemoWebsite() as served:
        yield served


def test_a_site_crawled_with_no_server_is_written_to_a_file_and_nothing_is_kept(site, tmp_path):
    data_dir = tmp_path / "data"
    items = tmp_path / "items.jsonl"
    done = crawl(
        no_server_env(data_dir), f"{site.base_url}/news", "--depth", "2", "--max-pages", "5",
        "-o", str(items),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    stored = [json.loads(line) for line in items.read_text().splitlines()]
    # The first page and the five its links led to, each once, as the store holds them
    assert len(stored) == 6 == len({item["key"] for item in stored})
    assert {item["model"] for item in stored} == {"article"}
    assert all(item["url"].startswith(site.base_url) for item in stored)
    said = " ".join(done.stdout.split())
    assert ": succeeded" in said and "pages: 6 ended (6 succeeded)" in said
    assert "6 items written to" in said
    assert "embedded store" in done.stderr
    assert not data_dir.exists()  # nothing kept


def test_a_crawl_whose_start_page_fails_says_why_and_exits_4(site, tmp_path):
    done = crawl(no_server_env(tmp_path / "data"), f"{site.base_url}/no-such-page")
    assert done.returncode == 4, done
    assert ": failed" in done.stdout
    assert "answered 404" in " ".join(done.stdout.split())


def test_an_output_file_of_an_unknown_kind_is_refused_in_one_line(tmp_path):
    done = crawl(no_server_env(tmp_path / "data"), "https://example.org/", "-o", "items.txt")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("error: -o: items.txt") and ".jsonl" in line


def test_a_crawl_through_a_standalone_keeps_its_run_there(site, tmp_path):
    with Standalone(standalone_env(tmp_path / "data")) as server:
        start = f"{site.base_url}/news"
        as_json, as_csv = tmp_path / "items.json", tmp_path / "items.csv"
        first = crawl(server.env, start, "--depth", "1", "--max-pages", "3", "-o", str(as_json))
        assert first.returncode == 0, first.stderr
        items = json.loads(as_json.read_text())
        assert len(items) == 4 and items[0]["url"] == start
        # The run is the server's: listed, with its counts, after the command ended
        [run] = [r for r in server.json_lines("run", "list") if r["_id"].startswith("crawl-")]
        assert (run["result"], run["counts"]) == ("succeeded", {"succeeded": 4})
        # The same start URL crawled again: its job is due again, a second run of its schedule
        again = crawl(server.env, start, "--depth", "1", "--max-pages", "3", "-o", str(as_csv))
        assert again.returncode == 0, again.stderr
        with as_csv.open(newline="") as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 4 and {"key", "url", "run_id", "last_seen"} <= set(rows[0])
        runs = [r for r in server.json_lines("run", "list") if r["_id"].startswith("crawl-")]
        assert len(runs) == 2 and runs[0]["schedule_id"] == runs[1]["schedule_id"]
        assert "embedded store" not in again.stderr


def test_a_run_is_followed_to_its_end_and_its_end_is_the_exit_code(tmp_path):
    # Given a standalone whose jobs take a while, and 4 of them
    env = slow_standalone_env(tmp_path, job_s=0.5)
    with Standalone(env) as server:
        server.cli("jobs", "import", str(website_rows(tmp_path / "jobs.jsonl", 4)))
        # When a run is started and waited for, then its history and pages read
        waited = server.cli("run", "now", "sweep-websites", "--wait", check=False)
        assert waited.returncode == 0, waited.stderr
        said = " ".join(waited.stdout.split())
        assert "sent: run sweep-websites@" in said and "pages: 4 ended (4 succeeded)" in said
        run_id = said.split("sent: run ")[1].split()[0]
        history = server.json_lines("run", "history", "--run", run_id)
        assert len(history) == 4 and {row["run_id"] for row in history} == {run_id}
        # And a run stopped while it is watched ends the watch with its result: stopped (5)
        server.cli("jobs", "import", str(website_rows(tmp_path / "more.jsonl", 40)))
        second = server.json_lines("run", "now", "sweep-websites")[0]["run_id"]
        server.cli("run", "stop", second)
        watched = server.cli("run", "watch", second, check=False)
        assert watched.returncode == 5, (watched.stdout, watched.stderr)
        assert f"run {second}: stopped" in watched.stdout


def test_children_filtered_by_outcome_and_errors_and_added_jobs_named(site, tmp_path):
    with Standalone(standalone_env(tmp_path / "data")) as server:
        added = server.cli(
            "jobs", "add", "website", f"{site.base_url}/news", "--depth", "1", "--once"
        )  # fmt: skip
        [job_id] = [w for w in added.stdout.split() if w.startswith("oid:")]
        assert server.json_lines("jobs", "show", "websites", job_id)[0]["target"]
        run_id = server.json_lines("run", "now", "sweep-websites")[0]["run_id"]
        assert server.cli("run", "watch", run_id, check=False).returncode == 0
        found = server.json_lines("run", "children", run_id)
        ok = server.json_lines("run", "children", run_id, "--outcome", "succeeded")
        assert len(found) == len(ok) >= 3
        assert server.json_lines("run", "children", run_id, "--errors") == []
        none = server.cli("run", "children", run_id, "--outcome", "failed")
        assert f"no page discovered by {run_id} ended failed" in " ".join(none.stdout.split())
        refused = server.cli("run", "children", run_id, "--outcome", "nope", check=False)
        assert refused.returncode == 2 and refused.stderr.startswith("error: --outcome")
