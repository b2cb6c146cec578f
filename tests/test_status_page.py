"""The status page in a real Chrome: a read token signs in through its form, the page shows a
run's counts change while the run goes on and a starved batch, and logs no console error."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from crawlsched.demo.node import LocalChromedriver
from crawlsched.drivers.browser_session import chrome_options
from tests.support.scratch import scratch_dir
from tests.support.standalone import Standalone, slow_standalone_env, website_rows
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(
    not LocalChromedriver.available(), reason="chromedriver is not installed"
)


# Read in one script: the page replaces its tables every refresh, so elements found one call
# earlier may be gone the next.
READ_TABLE = """
return Array.from(document.querySelectorAll('#' + arguments[0] + ' tbody tr'))
  .map(row => Array.from(row.cells).map(cell => cell.textContent));
"""


def cells(browser: webdriver.Chrome, table: str) -> list[list[str]]:
    return browser.execute_script(READ_TABLE, table)


def run_row(browser: webdriver.Chrome, run_id: str) -> list[str] | None:
    # The page breaks a run id before its fire time ("schedule\n@time").
    shown = run_id.replace("@", "\n@")
    return next((row for row in cells(browser, "runs") if row and row[0] == shown), None)


def test_the_status_page_follows_a_run_and_shows_a_starved_batch(tmp_path: Path):
    # Profile tasks that need an account find none: they starve after a second.
    env = slow_standalone_env(tmp_path, job_s=0.5, CRAWLSCHED_ADMISSION_WAIT_S="1")
    options = chrome_options()
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # A phone's width: about 80 columns of text.
    options.add_argument("--window-size=412,900")
    with Standalone(env) as server:
        server.cli("jobs", "import", str(website_rows(tmp_path / "jobs.jsonl", 12)))
        server.cli("jobs", "add", "profile", "twitter", "alice", "--task", "friend")
        token = server.json_lines("tokens", "create", "--role", "read", "--name", "page")[0]
        url = json.loads((server.data_dir / "api.json").read_text())["url"]
        # A local Chrome (its driver keeps the console log, which a remote session does not).
        service = Service(
            shutil.which("chromedriver"),
            service_args=["--allowed-ips=127.0.0.1"],
            env={**os.environ, "TMPDIR": str(scratch_dir("chrome-"))},
        )
        browser = webdriver.Chrome(service=service, options=options)
        try:
            browser.get(url)
            # Not signed in: the form. A wrong token is refused and says so.
            browser.find_element(By.ID, "token").send_keys("cs_bad_token")
            browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
            wait_for(lambda: "unknown or revoked" in browser.page_source, 30, "the refusal")
            browser.find_element(By.ID, "token").send_keys(token["token"])
            browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
            wait_for(lambda: browser.find_elements(By.ID, "runs"), 30, "the status page")

            websites = server.json_lines("run", "now", "sweep-websites")[0]["run_id"]
            seen_left: set[str] = set()

            def left_counts() -> bool:
                row = run_row(browser, websites)
                if row:
                    seen_left.add(row[3])
                return row is not None and row[1] == "succeeded"

            wait_for(left_counts, 90, "the website run to finish on the page", interval=0.2)
            # The page refreshed itself while the run went on: several "left" figures, 0 last.
            assert len(seen_left) >= 2, seen_left
            assert run_row(browser, websites)[3] == "0"

            profiles = server.json_lines("run", "now", "sweep-profiles")[0]["run_id"]

            def starved() -> bool:
                row = run_row(browser, profiles)
                # run, state, done, left, planned, found, ok, failed, exhausted, expired,
                # cut, waiting, starved
                return row is not None and row[12] not in ("", "0")

            wait_for(starved, 90, "a starved batch on the page", interval=0.2)
            assert "account" in browser.find_element(By.ID, "pools").text
            # Nothing wider than the screen: wide tables scroll inside their own box.
            assert browser.execute_script(
                "return document.documentElement.scrollWidth <= window.innerWidth"
            )
            errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == [], errors
        finally:
            browser.quit()
