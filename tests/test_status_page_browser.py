"""The operator's page in a real headless Chromium, against a real standalone server crawling
a real (slow) site on loopback:

- an admin's run page pauses and resumes the run with its buttons, and the store agrees;
- a form another origin (a page on another port: the same site for SameSite, so the cookie
  travels) posts to the buttons' route, or to the API's, changes nothing;
- once the run has ended, its task history names pages by URL with the 404 in the HTTP
  column, the counts by HTTP status and by kind of error show it, and the chart has time and
  rate axes with labels;
- at 1366 px and at 390 px (Chrome's mobile emulation: headless `--window-size` lays a page
  out 500 px wide at least) no table is wider than the screen and the page does not scroll
  sideways; screenshots of both pages at both widths are saved.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.scratch import scratch_dir
from tests.support.standalone import Standalone, standalone_env
from tests.support.waiting import wait_for

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which("chromedriver") is None, reason="no chromedriver"),
]
ARTICLES = 10
PAGE_S = 1.0  # each article takes this long to answer: the run lasts long enough to pause


class SlowSite(BaseHTTPRequestHandler):
    """A list page linking ARTICLES slow articles and one that does not exist."""

    def do_GET(self) -> None:
        if self.path.split("?")[0] == "/news":
            links = "".join(f'<article><a href="/a/{i}">{i}</a></article>' for i in range(ARTICLES))
            self._html(200, f"<html><body>{links}<article><a href='/a/missing'>x</a></article>")
        elif self.path.startswith("/a/") and self.path[3:].isdigit():
            time.sleep(PAGE_S)
            self._html(200, f"<html><h1>Article {self.path[3:]}</h1><p>text</p></html>")
        else:
            self._html(404, "<html>not here</html>")

    def _html(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


class Attacker(BaseHTTPRequestHandler):
    """A page on another port that auto-submits a form to `target` (a class attribute)."""

    target = ""

    def do_GET(self) -> None:
        page = (
            f'<form method="post" action="{self.target}"><input name="x" value="1"></form>'
            "<script>document.forms[0].submit()</script>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args: object) -> None:
        pass


def serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def chrome(width: int | None = None):
    """A headless Chromium: a 1366 by 900 window, or a phone `width` px wide (mobile emulation)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from crawlsched.drivers.browser_session import chrome_options

    options = chrome_options()
    if width is None:
        options.add_argument("--window-size=1366,900")
    else:
        metrics = {"width": width, "height": 844, "pixelRatio": 3.0}
        options.add_experimental_option("mobileEmulation", {"deviceMetrics": metrics})
    service = Service(
        shutil.which("chromedriver"),
        service_args=["--allowed-ips=127.0.0.1"],
        env={**os.environ, "TMPDIR": str(scratch_dir("chrome-"))},
    )
    return webdriver.Chrome(service=service, options=options)


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server = serve(SlowSite)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Standalone]:
    env = standalone_env(tmp_path_factory.mktemp("page") / "data", CRAWLSCHED_HOST_CONCURRENCY="1")
    with Standalone(env) as standalone:
        yield standalone


@pytest.fixture(scope="module")
def tokens(server) -> dict[str, str]:
    made = {}
    for role in ("admin", "read"):
        out = server.cli("tokens", "create", "--role", role, "--name", f"page-{role}", "--json")
        made[role] = json.loads(out.stdout)["token"]
    return made


def api_url(server: Standalone) -> str:
    return json.loads((server.data_dir / "api.json").read_text())["url"]


def signed_in(browser, url: str, token: str) -> None:
    """Through the login form, as an operator does."""
    from selenium.webdriver.common.by import By

    browser.get(f"{url}/")
    browser.find_element(By.NAME, "token").send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "form[action='/login'] button").click()
    wait_for(lambda: browser.find_elements(By.ID, "runs"), 30, "the status page after login")


def timeline(server: Standalone, run_id: str) -> dict:
    return server.get(f"/v1/runs/{run_id}/timeline")


def click(browser, action: str) -> None:
    from selenium.webdriver.common.by import By

    def button():
        found = browser.find_elements(By.CSS_SELECTOR, f"#actions button[data-action='{action}']")
        return found[0] if found and found[0].is_enabled() else None

    wait_for(button, 30, f"the {action} button").click()


@pytest.fixture(scope="module")
def ended_run(server, site, tokens) -> Iterator[str]:
    """The id of a crawl paused and resumed from the page, then ended."""
    url = api_url(server)
    server.cli("jobs", "add", "website", f"{site}/news", "--depth", "1", "--max-pages", "30")
    run_id = json.loads(server.cli("run", "now", "sweep-websites", "--json").stdout)["run_id"]
    browser = chrome()
    attacker = serve(Attacker)
    try:
        signed_in(browser, url, tokens["admin"])
        # A form from another port of this host, to the buttons' route and to the API's
        other = f"http://127.0.0.1:{attacker.server_address[1]}/"
        for target in (f"{url}/status/runs/{run_id}/pause", f"{url}/v1/runs/{run_id}/pause"):
            Attacker.target = target
            browser.get(other)
            wait_for(lambda: browser.current_url.startswith(url), 30, "the form's answer")
            wait_for(lambda: '"status"' in browser.page_source, 30, "the refusal")
            assert '"status":40' in browser.page_source.replace(" ", "")  # 401 or 403
            assert not timeline(server, run_id)["paused"], f"a form to {target} paused the run"
        # The admin's page pauses the run with its button, and resumes it
        browser.get(f"{url}/status/runs/{run_id}")
        assert not timeline(server, run_id)["ended"], "the run ended before it could be paused"
        click(browser, "pause")
        wait_for(lambda: timeline(server, run_id)["paused"], 30, "the run to be paused")
        wait_for(lambda: _text(browser, "state") == "paused", 30, "the page to say paused")
        click(browser, "resume")
        wait_for(lambda: not timeline(server, run_id)["paused"], 30, "the run to go on")
        wait_for(lambda: timeline(server, run_id)["ended"], 120, "the run to end")
        wait_for(lambda: _text(browser, "state") == "succeeded", 30, "the page to say so")
    finally:
        browser.quit()
        attacker.shutdown()
        attacker.server_close()
    yield run_id


def _text(browser, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.ID, element_id).text


def test_the_buttons_pause_and_resume_and_another_origin_changes_nothing(ended_run, server):
    run_id = ended_run
    # (the fixture drove it; here, what the store kept of it)
    assert timeline(server, run_id)["result"] == "succeeded"


def test_the_history_names_pages_by_url_and_counts_the_404(ended_run, server, tokens, site):
    from selenium.webdriver.common.by import By

    run_id = ended_run
    browser = chrome()
    try:
        signed_in(browser, api_url(server), tokens["read"])
        browser.get(f"{api_url(server)}/status/runs/{run_id}")
        wait_for(lambda: "/a/missing" in _text(browser, "history"), 30, "the history rows")
        rows = [
            [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in browser.find_elements(By.CSS_SELECTOR, "#history tbody tr")
        ]
        assert all(row[3].startswith(f"{site}/") for row in rows), rows
        assert "str:child:" not in _text(browser, "history")
        missing = next(row for row in rows if row[3].endswith("/a/missing"))
        assert missing[1] in ("failed", "exhausted") and missing[4] == "404", missing
        assert "answered 404" in missing[5]
        statuses = _text(browser, "statuses").splitlines()
        assert "404 1" in statuses, statuses
        assert "HttpStatusError 1" in _text(browser, "kinds").splitlines()
        # The chart: both axes with labels, and the axes' titles
        chart = browser.find_element(By.ID, "chart")
        x_labels = chart.find_elements(By.CSS_SELECTOR, ".x-axis text")
        y_labels = chart.find_elements(By.CSS_SELECTOR, ".y-axis text")
        assert len(x_labels) >= 3 and len(y_labels) >= 5
        texts = [t.get_attribute("textContent") for t in x_labels + y_labels]
        assert any(t.startswith("time (UTC)") for t in texts) and "pages / s" in texts
        assert any(":" in t and t[:2].isdigit() for t in texts)  # clock times on the x axis
        assert chart.find_elements(By.CSS_SELECTOR, ".bars rect")
        # A reader's page shows the commands, not buttons
        assert not browser.find_elements(By.CSS_SELECTOR, "#actions button")
    finally:
        browser.quit()


# Every table's box within the screen, and nothing that makes the page scroll sideways.
WIDTHS_JS = """
const tables = [...document.querySelectorAll('table')].map(t => {
  const r = t.getBoundingClientRect();
  return {id: t.id, left: r.left, right: r.right, width: r.width};
});
return {viewport: window.innerWidth, page: document.documentElement.scrollWidth, tables};
"""


@pytest.mark.parametrize("width", [None, 390], ids=["1366px", "390px-mobile"])
def test_no_table_is_wider_than_the_screen(ended_run, server, tokens, width, tmp_path_factory):
    from selenium.webdriver.common.by import By

    run_id = ended_run
    shots = tmp_path_factory.mktemp("page-shots")
    url = api_url(server)
    browser = chrome(width)
    try:
        signed_in(browser, url, tokens["admin"])
        for name, path in (("status", "/"), ("run", f"/status/runs/{run_id}")):
            browser.get(f"{url}{path}")
            ready = "#runs tbody tr td" if name == "status" else "#history tbody tr td"
            wait_for(lambda r=ready: browser.find_elements(By.CSS_SELECTOR, r), 30, f"{name} rows")
            time.sleep(0.5)  # one refresh drawn
            seen = browser.execute_script(WIDTHS_JS)
            shown = width or 1366
            assert seen["viewport"] == shown, seen  # the emulated phone really is 390 px
            wide = [t for t in seen["tables"] if t["right"] > shown + 0.5 or t["left"] < -0.5]
            assert not wide, f"{name} page at {shown}px: tables wider than the screen {wide}"
            assert seen["page"] <= shown, f"{name} page at {shown}px scrolls sideways: {seen}"
            browser.save_screenshot(str(shots / f"{name}-{shown}px.png"))
    finally:
        browser.quit()
    print(f"\nscreenshots in {shots}")


def test_the_retry_and_stop_buttons_act_too(ended_run, server, site, tokens):
    # (last: a retry adds history rows the tests above count)
    from selenium.webdriver.common.alert import Alert

    url = api_url(server)
    browser = chrome()
    try:
        signed_in(browser, url, tokens["admin"])
        # The ended run's failed page is crawled again from its page
        browser.get(f"{url}/status/runs/{ended_run}")
        click(browser, "retry-failed")
        wait_for(lambda: timeline(server, ended_run).get("executions", 0) >= 13, 60, "the retry")
        wait_for(lambda: timeline(server, ended_run)["ended"], 60, "the retried run to end")
        # A new run, stopped from its page (the button asks first)
        server.cli("jobs", "add", "website", f"{site}/news?again=1", "--depth", "1")
        run_id = json.loads(server.cli("run", "now", "sweep-websites", "--json").stdout)["run_id"]
        browser.get(f"{url}/status/runs/{run_id}")
        click(browser, "stop")
        Alert(browser).accept()
        wait_for(lambda: timeline(server, run_id)["result"] == "stopped", 60, "the run to stop")
        wait_for(lambda: _text(browser, "state") == "stopped", 30, "the page to say so")
    finally:
        browser.quit()
