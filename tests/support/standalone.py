"""`crawlsched standalone` in a subprocess of its own session, and the CLI beside it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

from crawlsched.reference import load_reference
from tests.support.scratch import scratch_file
from tests.support.waiting import wait_for
from tests.support.workers import REPO, TEST_HOST_RULES, TEST_SECRET_KEY

CLI = str(Path(sys.executable).parent / "crawlsched")


def standalone_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLSCHED_")}
    env.update(
        CRAWLSCHED_DATA_DIR=str(data_dir),
        CRAWLSCHED_API_PORT="0",
        CRAWLSCHED_SECRET_KEY=TEST_SECRET_KEY,
        CRAWLSCHED_TARGET_ALLOW_NETWORKS='["127.0.0.1/32"]',
        CRAWLSCHED_BROWSER_HOST_RESOLVER_RULES=TEST_HOST_RULES,
        CRAWLSCHED_HOST_DELAY_S="0",
        CRAWLSCHED_CLOCK_INTERVAL_S="0.5",
        CRAWLSCHED_SNAPSHOT_INTERVAL_S="0.5",
        CRAWLSCHED_LOG_FORMAT="json",
        CRAWLSCHED_LOG_LEVEL="WARNING",
        PYTHONPATH=str(REPO),
    )
    env.update(extra)
    return env


def slow_reference(path: Path) -> Path:
    """The packaged reference with the `web` media on the test's slow driver, 2 jobs a batch."""
    data = load_reference().model_dump(mode="json")
    for media in data["media"]:
        if media["name"] == "web":
            media["driver_class"] = "slow"
            for task in media["tasks"].values():
                task["batch_limit"] = 2
    path.write_text(yaml.safe_dump(data))
    return path


def slow_standalone_env(tmp_path: Path, job_s: float, **extra: str) -> dict[str, str]:
    """A standalone whose `web` jobs take `job_s` each on the slow driver, 2 to a batch."""
    return standalone_env(
        tmp_path / "data",
        CRAWLSCHED_REFERENCE_FILE=str(slow_reference(tmp_path / "reference.yaml")),
        CRAWLSCHED_DRIVER_MODULES='["tests.support.slow_driver"]',
        CRAWLSCHED_TEST_SLOW_DRIVER_S=str(job_s),
        **extra,
    )


def website_rows(path: Path, count: int) -> Path:
    """An import file of `count` website jobs on loopback (the slow driver never fetches)."""
    rows = (
        {"kind": "website", "media": "web", "target": f"http://127.0.0.1:9/page-{i}"}
        for i in range(count)
    )
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@dataclass
class Standalone:
    env: dict[str, str]
    process: subprocess.Popen | None = None
    log: object = field(default=None)

    @property
    def data_dir(self) -> Path:
        return Path(self.env["CRAWLSCHED_DATA_DIR"])

    def start(self) -> Standalone:
        self.log = scratch_file("standalone-", ".log")
        self.process = subprocess.Popen(
            [CLI, "standalone"],
            cwd=REPO,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(self._serving, 60, f"the standalone server (log {self.log.name})")
        return self

    def _serving(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"standalone exited {self.process.returncode}: {self.output()}")
        try:
            api = json.loads((self.data_dir / "api.json").read_text())
            return httpx.get(f"{api['url']}/health", timeout=5).status_code == 200
        except (OSError, ValueError, KeyError, httpx.HTTPError):
            return False

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")[-3000:]

    def stop(self) -> int:
        """SIGTERM, then wait for the clean stop; its exit status."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        os.killpg(self.process.pid, signal.SIGTERM)
        return self.process.wait(timeout=120)

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def __enter__(self) -> Standalone:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self.kill()

    def cli(self, *args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess:
        """`crawlsched ARGS` from another terminal (it finds the server in the data dir)."""
        result = subprocess.run(
            [CLI, *args],
            cwd=REPO,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"crawlsched {' '.join(args)}: {result.returncode}\n{result.stderr}"
            )
        return result

    def crawl_site(self, schedule_id: str, start: str, *notify: str) -> None:
        """A website job for `start` and a daily schedule of that one target (`notify`: more
        `schedules add` options), through the command line."""
        self.cli("jobs", "add", "website", start)
        self.cli(
            "schedules", "add", schedule_id, "--every", "86400",
            "--target-collection", "websites", "--target", start, *notify,
        )  # fmt: skip

    def get(self, path: str) -> dict:
        """GET an API route with the server's local admin token (quicker than a CLI process)."""
        api = json.loads((self.data_dir / "api.json").read_text())
        headers = {"Authorization": f"Bearer {api['token']}"}
        response = httpx.get(f"{api['url']}{path}", headers=headers, timeout=30)
        response.raise_for_status()
        return response.json()

    def json_lines(self, *args: str) -> list[dict]:
        return [json.loads(line) for line in self.cli(*args, "--json").stdout.splitlines()]
