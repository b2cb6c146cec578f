"""Rough edges of the command line a newcomer and an operator met (each seen failing before it
was fixed): bad input is one line that says what was wrong and how to fix it, with an exit code
the README lists; tables show what their columns promise."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from bson import ObjectId

from tests.test_cli_contract import RUN_ID, invoke, seeded  # noqa: F401  (seeded: a fixture)

CLI = str(Path(sys.executable).parent / "crawlsched")


def one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_run_history_of_a_schedule_shows_a_reclaimed_row_without_a_start(seeded, monkeypatch):  # noqa: F811
    # Given a row a restart reclaimed: it ended, it never started
    monkeypatch.setenv("COLUMNS", "200")
    seeded.history.add(
        [
            {
                "_id": ObjectId(),
                "schedule_id": "sweep-websites",
                "run_id": RUN_ID,
                "job_id": "str:reclaimed-job",
                "outcome": "expired",
                "ended_at": datetime(2026, 1, 1, 1, tzinfo=UTC),
            }
        ]
    )
    code, out, err = invoke("run", "history", "--schedule", "sweep-websites")
    assert code == 0, err
    assert "reclaimed-job" in out and "expired" in out


def _website_jobs(rt, count: int, discovered: int) -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    rt.db.websites.insert_many(
        [
            {"_id": ObjectId(), "target": f"http://127.0.0.1:9/added-{i}", "media_name_id": 100,
             "task": "article", "state": 1, "interval_s": 3600, "execution_date": at}
            for i in range(count)
        ]
        + [
            {"_id": f"child:{i:04d}", "url": f"http://127.0.0.1:9/found-{i}", "media_name_id": 100,
             "task": "article", "state": 4, "scope_run": RUN_ID, "depth": 1, "run_id": RUN_ID}
            for i in range(discovered)
        ]
    )  # fmt: skip


def test_jobs_list_says_how_many_of_how_many_and_lists_added_jobs_first(seeded):  # noqa: F811
    # Given 70 more added jobs (72 in all with the seeded two) and 5 discovered pages
    _website_jobs(seeded, 70, 5)
    code, out, err = invoke("jobs", "list", "websites")
    assert code == 0, err
    assert "50 of 77" in " ".join(out.split())
    assert "found-" not in out  # the discovered pages come after the jobs users added
    code, out, _ = invoke("jobs", "list", "websites", "--json", "--limit", "1000")
    listed = [json.loads(line) for line in out.splitlines()]
    assert [job["job_id"].startswith("str:child:") for job in listed] == [False] * 72 + [True] * 5


def test_a_discovered_page_shows_its_url_as_its_target(seeded, monkeypatch):  # noqa: F811
    monkeypatch.setenv("COLUMNS", "200")
    _website_jobs(seeded, 0, 1)
    code, out, err = invoke("jobs", "list", "websites", "--skip", "2")
    assert code == 0, err
    assert "http://127.0.0.1:9/found-0" in out
    code, out, err = invoke("jobs", "show", "websites", "str:child:0000")
    assert code == 0, err
    [target] = [line for line in out.splitlines() if "target" in line]
    assert "http://127.0.0.1:9/found-0" in target


def test_an_unknown_collection_is_named_without_python_syntax(seeded):  # noqa: F811
    code, _, err = invoke("jobs", "list", "nosuch")
    assert code == 2
    line = one_error(err)
    assert "known: profiles, websites" in line and "(" not in line.split("known:")[1]


@pytest.mark.parametrize("args", [["hosts", "block", "nosuch"], ["hosts", "unblock", "nosuch"]])
def test_a_word_that_is_no_host_name_is_refused(seeded, args):  # noqa: F811
    code, _, err = invoke(*args)
    assert code == 2
    assert "nosuch" in one_error(err)
    assert "nosuch" not in json.dumps([doc["_id"] for doc in seeded.db.hosts.find({})])


def test_limits_for_a_host_never_crawled_are_refused_unless_asked_for(seeded):  # noqa: F811
    code, _, err = invoke("hosts", "set", "http://127.0.0.1:9999", "--delay", "2")
    assert code == 2
    assert "--new" in one_error(err)
    assert seeded.hosts.get("http://127.0.0.1:9999") is None
    code, _, err = invoke("hosts", "set", "http://127.0.0.1:9999", "--delay", "2", "--new")
    assert code == 0, err
    assert seeded.hosts.get("http://127.0.0.1:9999")["policy"] == {"delay_s": 2.0}


def test_a_host_and_port_without_a_scheme_finds_the_one_crawled(seeded):  # noqa: F811
    # The seeded host is http://127.0.0.1:9; named without its scheme
    code, out, err = invoke("hosts", "show", "127.0.0.1:9", "--json")
    assert code == 0, err
    assert json.loads(out)["host"] == "http://127.0.0.1:9"


def test_media_list_keeps_task_names_whole_in_80_columns(seeded, monkeypatch):  # noqa: F811
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, err = invoke("media", "list")
    assert code == 0, err
    assert "profile_replies" in out


@pytest.mark.parametrize("every", ["1e308", "inf", "nan", "0"])
def test_an_interval_out_of_range_is_one_line(seeded, every):  # noqa: F811
    code, out, err = invoke(
        "schedules", "add", "too-long", "--every", every, "--collection", "websites"
    )
    assert code == 2, (out, err)
    assert "every" in one_error(err)
    assert seeded.schedules.get("too-long") is None


def test_resuming_a_run_with_nothing_held_says_what_goes_on(seeded):  # noqa: F811
    seeded.db.runs.update_one(
        {"_id": RUN_ID},
        {"$set": {"state": "running", "planning": False, "planned": 3, "outstanding": 3}},
    )
    code, out, err = invoke("run", "pause", RUN_ID)
    assert code == 0, err
    code, out, err = invoke("run", "resume", RUN_ID)
    assert code == 0, err
    assert "0 waiting jobs" not in out
    assert "3 pages" in out


def test_bare_crawlsched_prints_its_help_and_exits_0():
    done = subprocess.run([CLI], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done
    assert "Usage" in done.stdout and "error" not in done.stderr + done.stdout


def test_help_shows_no_type_after_a_flag():
    for args in (["--help"], ["run", "list", "--help"], ["media", "add", "--help"]):
        done = subprocess.run(
            [CLI, *args], capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "COLUMNS": "120"},
        )  # fmt: skip
        assert done.returncode == 0, done
        assert "<bool>" not in done.stdout, args


def _standalone(data_dir: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLSCHED_")}
    env.update(CRAWLSCHED_DATA_DIR=data_dir, CRAWLSCHED_LOG_FORMAT="json")
    return subprocess.run(
        [CLI, "standalone", *args], env=env, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


def test_a_standalone_on_a_port_in_use_says_so_before_setting_anything_up(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = _standalone(str(tmp_path / "data"), "--port", str(port))
    assert done.returncode == 1, done
    line = one_error(done.stderr)
    assert str(port) in line and "CRAWLSCHED_API_PORT" in line
    assert done.stdout == ""
    assert not (tmp_path / "data").exists()  # nothing set up


@pytest.mark.parametrize("where", ["file", "/proc/crawlsched-data"])
def test_a_data_directory_that_cannot_be_one_names_the_setting(tmp_path, where):
    data_dir = tmp_path / "a-file" if where == "file" else Path(where)
    if where == "file":
        data_dir.write_text("not a folder")
    done = _standalone(str(data_dir), "--port", "0")
    assert done.returncode == 2, done
    line = one_error(done.stderr)
    assert "CRAWLSCHED_DATA_DIR" in line and str(data_dir) in line
    assert "Errno" not in line


def test_a_reclaimed_row_reads_as_such_in_json_too(seeded):  # noqa: F811
    seeded.history.add(
        [{"_id": ObjectId(), "schedule_id": "sweep-websites", "run_id": RUN_ID,
          "job_id": "str:r", "outcome": "expired",
          "ended_at": datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=1)}]
    )  # fmt: skip
    code, out, err = invoke("run", "history", "--schedule", "sweep-websites", "--json")
    assert code == 0, err
    assert any(json.loads(line)["job_id"] == "str:r" for line in out.splitlines())
