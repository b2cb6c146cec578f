"""Where a command's data lives.

- With no standalone server for the data directory and no MongoDB (`CRAWLSCHED_MONGO_URL`), a
  command would run on an embedded store of its own that vanishes when it ends: one that
  changes the store refuses, exit 1, saying where data has to live, and prints nothing it
  would have made (no token); one that reads says the store is empty and why. Judged by the
  commands' own output and the data directory, which stays absent.
(`store load --drop` through a server keeps the server's API tokens:
`tests/test_api_remote_boundary.py`.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crawlsched.runtime import Runtime
from crawlsched.store.dump import dump_database
from tests.conftest import settings_for_tests

CLI = str(Path(sys.executable).parent / "crawlsched")


def _cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLSCHED_")}
    env["CRAWLSCHED_DATA_DIR"] = str(data_dir)
    return subprocess.run(
        [CLI, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


WRITES = [
    ["tokens", "create", "--role", "admin", "--name", "ops"],
    ["schedules", "add", "nightly", "--cron", "0 3 * * *", "--collection", "websites"],
    ["jobs", "add", "website", "https://example.org/"],
    ["init-db"],
]


@pytest.mark.parametrize("args", WRITES, ids=lambda a: " ".join(a[:2]))
def test_a_change_to_a_store_that_would_vanish_is_refused(tmp_path, args):
    data_dir = tmp_path / "data"
    done = _cli(data_dir, *args)
    assert done.returncode == 1, done
    assert done.stdout == ""  # no token, no "schedule added"
    [line] = done.stderr.splitlines()
    assert "vanishes" in line and "`crawlsched standalone`" in line
    assert "CRAWLSCHED_MONGO_URL" in line and str(data_dir) in line
    assert not data_dir.exists()


def test_a_load_into_a_store_that_would_vanish_is_refused(tmp_path):
    dump = tmp_path / "dump"
    rt = Runtime(settings_for_tests(mongo_url=f"mongomock://dump-{tmp_path.name}"))
    rt.schedules.ensure_defaults(rt.now())
    dump_database(rt.db, dump / "crawlsched")
    done = _cli(tmp_path / "data", "store", "load", str(dump))
    assert done.returncode == 1 and done.stdout == ""
    assert "vanishes" in done.stderr and "documents loaded" not in done.stderr


def test_a_read_says_the_store_is_empty_and_why(tmp_path):
    done = _cli(tmp_path / "data", "schedules", "list", "--json")
    assert done.returncode == 0, done
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("note: the store is empty: no crawlsched standalone server runs")
