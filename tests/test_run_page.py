"""A run's page in a real Chrome at a phone's width, over a real standalone server: the runs
list keeps its key columns on screen and links the run to its page; the page's progress bar
and counts move while the run goes on, its chart draws, its tables fill, and the console
holds no error."""

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

PHONE_WIDTH = 390
PAGES = 24

# Read in one script: the pages replace their tables every refresh.
RUN_ROW_RECTS = """
const shown = arguments[0].replace("@", "\\n@");
const row = Array.from(document.querySelectorAll('#runs tbody tr'))
  .find(r => r.cells.length && r.cells[0].textContent === shown);
if (!row) return null;
const box = c => { const r = c.getBoundingClientRect();
                   return {left: r.left, right: r.right, width: r.width, text: c.textContent}; };
return {cells: Array.from(row.cells).map(box),
        heads: Array.from(document.querySelectorAll('#runs thead th')).map(box),
        viewport: document.documentElement.clientWidth};
"""
PROGRESS = """
const bar = document.getElementById('progress');
return {value: bar.value, max: bar.max, state: document.getElementById('state').textContent,
        text: document.getElementById('progress-text').textContent};
"""
TABLE = """
return Array.from(document.querySelectorAll('#' + arguments[0] + ' tbody tr'))
  .map(row => Array.from(row.cells).map(cell => cell.textContent));
"""


def local_chrome() -> webdriver.Chrome:
    options = chrome_options()
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_argument(f"--window-size={PHONE_WIDTH},900")
    # A local Chrome (its driver keeps the console log, which a remote session does not).
    service = Service(
        shutil.which("chromedriver"),
        service_args=["--allowed-ips=127.0.0.1"],
        env={**os.environ, "TMPDIR": str(scratch_dir("chrome-"))},
    )
    browser = webdriver.Chrome(service=service, options=options)
    # A window cannot be made that narrow on every desktop: emulate the phone's screen.
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": PHONE_WIDTH, "height": 844, "deviceScaleFactor": 1, "mobile": True},
    )
    return browser


def test_run_page_follows_a_run_at_a_phones_width(tmp_path: Path):
    # Slow enough that the page, refreshing every two seconds, sees the run go on.
    env = slow_standalone_env(tmp_path, job_s=1.5)
    with Standalone(env) as server:
        server.cli("jobs", "import", str(website_rows(tmp_path / "jobs.jsonl", PAGES)))
        token = server.json_lines("tokens", "create", "--role", "read", "--name", "page")[0]
        url = json.loads((server.data_dir / "api.json").read_text())["url"]
        browser = local_chrome()
        try:
            browser.get(url)
            browser.find_element(By.ID, "token").send_keys(token["token"])
            browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
            wait_for(lambda: browser.find_elements(By.ID, "runs"), 30, "the status page")
            run_id = server.json_lines("run", "now", "sweep-websites")[0]["run_id"]

            # The runs list at a phone's width: run, state, done and left stay on screen.
            rects = wait_for(
                lambda: browser.execute_script(RUN_ROW_RECTS, run_id), 60, "the run's row"
            )
            width = rects["viewport"]
            assert width <= PHONE_WIDTH
            for box in rects["cells"][:4] + rects["heads"][:4]:
                assert box["width"] > 0 and box["left"] >= 0 and box["right"] <= width, (box, width)
            assert [h["text"] for h in rects["heads"][:4]] == ["run", "state", "done", "left"]
            # The rest are left for the run's page (hidden, not scrolled off).
            assert all(box["width"] == 0 for box in rects["cells"][4:]), rects["cells"]

            link = browser.find_element(By.CSS_SELECTOR, "#runs tbody td.id a")
            link.click()
            wait_for(lambda: "/status/runs/" in browser.current_url, 30, "the run's page")

            seen: list[tuple[float, float]] = []
            offered: set[tuple[str, ...]] = set()
            actions = (
                "return [...document.querySelectorAll('#actions code')].map(e => e.textContent)"
            )

            def ended() -> bool:
                shown = browser.execute_script(PROGRESS)
                if (shown["value"], shown["max"]) not in seen:
                    seen.append((shown["value"], shown["max"]))
                offered.add(tuple(browser.execute_script(actions)))
                return shown["state"] == "succeeded"

            wait_for(ended, 120, "the run to end on its page", interval=0.2)
            # The page refreshed itself while the run went on: the bar moved, and ended full.
            values = [value for value, _ in seen]
            assert len({v for v in values if v < PAGES}) >= 2, seen
            assert values == sorted(values), seen
            assert seen[-1] == (PAGES, PAGES)
            # While it ran a reader's page offered to pause or stop it (as commands: buttons
            # are an admin's); ended with every page crawled, nothing.
            run_id = browser.find_element(By.ID, "run-id").text
            running = (f"crawlsched run pause {run_id}", f"crawlsched run stop {run_id}")
            assert running in offered, offered
            assert browser.execute_script(actions) == []
            assert browser.execute_script(PROGRESS)["text"].startswith(
                f"{PAGES} done, 0 outstanding"
            )

            # The chart draws the series: a bar per bucket, some above the baseline.
            heights = browser.execute_script(
                "return [...document.querySelectorAll('#chart .bars rect')]"
                ".map(r => Number(r.getAttribute('height')))"
            )
            assert len(heights) >= 2 and max(heights) > 0, heights
            caption = browser.find_element(By.ID, "chart-caption").text
            assert caption.startswith(f"{PAGES} pages in "), caption

            outcomes = dict(browser.execute_script(TABLE, "outcomes"))
            assert outcomes["succeeded"] == str(PAGES) and outcomes["expired"] == "0"
            stages = {row[0]: row[1] for row in browser.execute_script(TABLE, "stages")}
            assert all(stages[s] != "-" for s in ("created", "first fetch", "last fetch", "ended"))
            assert browser.execute_script(TABLE, "depths")[0][:2] == ["0", str(PAGES)]
            history = browser.execute_script(TABLE, "history")
            assert len(history) == 20 and {row[1] for row in history} == {"succeeded"}
            # The history is paged: the older rows are one click away.
            browser.find_element(By.ID, "older").click()
            wait_for(
                lambda: len(browser.execute_script(TABLE, "history")) == PAGES - 20,
                30,
                "the older history rows",
            )
            assert browser.find_element(By.ID, "history-page").text == f"rows 21-{PAGES}"
            assert browser.find_element(By.ID, "actions").tag_name == "div"
            assert not browser.find_element(By.ID, "error").is_displayed()
            assert browser.execute_script(
                "return document.documentElement.scrollWidth <= window.innerWidth"
            )
            errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == [], errors
        finally:
            browser.quit()
