"""`crawlsched standalone`: one process keeps its data across a clean stop and a kill -9, every
CLI command works beside it through the API, and its data directory is a MongoDB dump."""

from __future__ import annotations

import json
from pathlib import Path

from crawlsched.demo.website import DemoWebsite
from tests.support.standalone import (
    Standalone,
    slow_standalone_env,
    standalone_env,
    website_rows,
)
from tests.support.waiting import wait_for


def run_now(server: Standalone, schedule: str) -> str:
    return server.json_lines("run", "now", schedule)[0]["run_id"]


def finished(server: Standalone, run_id: str) -> dict | None:
    run = server.json_lines("run", "status", run_id)[0]
    return run if run["state"] == "finished" else None


def test_a_clean_restart_keeps_everything_and_the_next_sweep_runs(tmp_path: Path):
    env = standalone_env(tmp_path / "data", ALICE_SECRET="alice-password")
    with DemoWebsite() as site, Standalone(env) as server:
        server.cli("schedules", "add", "nightly", "--cron", "0 3 * * *", "--collection", "websites")
        server.cli("accounts", "add", "twitter", "alice", "--secret-env", "ALICE_SECRET")
        for section in ("news", "blog"):
            server.cli("jobs", "add", "website", f"{site.base_url}/{section}/")
        # A file read here and one written here, by a command that runs on the server.
        rows = tmp_path / "rows.csv"
        rows.write_text("kind,media,target\nprofile,twitter,bob\nprofile,myspace,eve\n")
        rejects = tmp_path / "rejects.jsonl"
        server.cli("jobs", "import", str(rows), "--rejects", str(rejects), check=False)
        [rejected] = [json.loads(line) for line in rejects.read_text().splitlines()]
        assert "myspace" in json.dumps(rejected)
        run_id = run_now(server, "sweep-websites")
        run = wait_for(lambda: finished(server, run_id), 60, f"run {run_id} to finish")
        assert run["counts"] == {"succeeded": 2}
        assert server.stop() == 0
    data = tmp_path / "data"
    assert (data / "current" / "CLEAN").exists() and not (data / "api.json").exists()

    # While it is stopped, a command says so instead of acting on an empty store.
    stopped = server.cli("schedules", "list", check=False)
    assert stopped.returncode == 1
    assert "no crawlsched standalone server is running" in stopped.stderr

    with Standalone(env) as again:
        schedules = {s["_id"] for s in again.json_lines("schedules", "list")}
        assert schedules == {"nightly", "sweep-profiles", "sweep-websites"}
        assert [a["username"] for a in again.json_lines("accounts", "list")] == ["alice"]
        profiles = again.json_lines("jobs", "summary")
        assert {p["collection"]: p["total"] for p in profiles}["profiles"] == 2  # bob's two
        assert again.json_lines("runs")[0]["_id"] == run_id
        assert again.json_lines("run", "status", run_id)[0]["counts"] == {"succeeded": 2}
        # The next sweep runs: made due, the server's own clock fires it.
        with DemoWebsite() as site:  # a new port: re-add the jobs on it
            again.cli("jobs", "add", "website", f"{site.base_url}/news/")
            again.cli("sweep-now", "sweep-websites")

            def next_sweep() -> dict | None:
                runs = again.get("/v1/runs?schedule_id=sweep-websites")["items"]
                newer = [r for r in runs if r["_id"] > run_id and r["state"] == "finished"]
                return newer[0] if newer else None

            run = wait_for(next_sweep, 60, "the next sweep to finish")
        assert run["planned"] == 1 and run["counts"] == {"succeeded": 1}


def test_kill_9_in_the_middle_of_a_run_loses_nothing_and_counts_nothing_twice(tmp_path: Path):
    env = slow_standalone_env(tmp_path, job_s=1.5)
    server = Standalone(env).start()
    try:
        server.cli("jobs", "import", str(website_rows(tmp_path / "jobs.jsonl", 16)))
        run_id = run_now(server, "sweep-websites")

        def some_ended() -> bool:
            # Jobs record their outcome before their report reaches the run: kill between.
            running = server.get("/v1/stats")["jobs_by_state"]["websites"]["running"]
            return 0 < running < 16

        wait_for(some_ended, 60, "a run half done", interval=0.05)
        server.kill()
    finally:
        server.kill()
    assert not (tmp_path / "data" / "current" / "CLEAN").exists()

    with Standalone(env) as again:
        run = wait_for(lambda: finished(again, run_id), 90, f"run {run_id} to finish")
        assert run["planned"] == 16
        # Every job ended exactly once: succeeded, or expired if its batch died with the process.
        assert sum(run["counts"].values()) == 16
        assert set(run["counts"]) <= {"succeeded", "expired"}
        summary = again.cli("jobs", "summary").stdout
        assert "running" in summary
        jobs = again.json_lines("stats")[0]["jobs_by_state"]["websites"]
        assert jobs["running"] == 0  # no job left running


def test_the_data_directory_loads_into_a_mongodb_server_and_plans_the_same_jobs(
    tmp_path: Path, multiprocess_mongo_url: str, mongo_database_name: str
):
    env = standalone_env(tmp_path / "data")
    with Standalone(env) as server:
        for i in range(5):
            server.cli(
                "jobs", "add", "website", f"http://127.0.0.1:9/site-{i}/", "--task", "article"
            )
        server.cli("jobs", "add", "profile", "twitter", "alice")
        planned_here = server.json_lines("doctor")
        assert server.stop() == 0
    # `crawlsched store load` (or mongorestore --dir <data>/current) into a real server.
    mongo = {
        "CRAWLSCHED_MONGO_URL": multiprocess_mongo_url,
        "CRAWLSCHED_MONGO_DB": mongo_database_name,
    }
    loaded = server.cli("store", "load", str(tmp_path / "data"), **mongo)
    assert "documents loaded" in loaded.stdout
    direct = server.cli("doctor", "--json", **mongo)
    planned_there = [json.loads(line) for line in direct.stdout.splitlines()]
    assert planned_there == planned_here
    assert sum(row.get("due", 0) for row in planned_here) == 7


def test_a_missing_or_broken_api_token_is_said_as_such_not_as_a_server_down(tmp_path: Path):
    # Given a running standalone server, reached by its address (as from another machine)
    with Standalone(standalone_env(tmp_path / "data")) as server:
        api = json.loads((server.data_dir / "api.json").read_text())
        by_url = {"CRAWLSCHED_API_URL": api["url"]}

        # When no token is set, the server's refusal says which variable to set
        missing = server.cli("hosts", "list", check=False, **by_url)
        assert missing.returncode == 1
        assert "set CRAWLSCHED_API_TOKEN" in missing.stderr
        assert "cannot be reached" not in missing.stderr

        # And a token that is no valid header value (a pasted line break) is said to be one,
        # without printing it
        broken = server.cli(
            "hosts", "list", check=False, **by_url, CRAWLSCHED_API_TOKEN="s3cr3t\nrest"
        )
        assert broken.returncode == 2
        assert "not a valid header value" in broken.stderr
        assert "s3cr3t" not in broken.stderr

        # Then the right token works, a trailing line break or not
        good = server.cli("hosts", "list", **by_url, CRAWLSCHED_API_TOKEN=api["token"] + "\n")
        assert good.returncode == 0
