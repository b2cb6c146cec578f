"""The status page's cookie reads the API, it never writes it: a page on another port of the
same host (the same site for SameSite) that auto-submits a form to a changing route, carrying
the cookie, changes nothing. Only the run page's own buttons act with an admin's cookie, from
the page's origin with its CSRF token (`test_page_actions.py`). Judged by the schedules in
the store, not by the answer alone."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from crawlsched.api.auth import COOKIE
from crawlsched.runtime import Runtime
from tests.support.api import ApiServer, serving
from tests.support.scratch import scratch_dir
from tests.support.waiting import wait_for

SCHEDULE = "sweep-websites"


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServer]:
    with serving("mongomock://api-cookie") as server:
        yield server


def schedules(rt: Runtime) -> list[str]:
    return sorted(map(repr, rt.db.schedules.find({})))


def active(rt: Runtime) -> bool:
    doc = rt.schedules.get(SCHEDULE)
    return doc.get("state", "active") == "active" and doc.get("enabled", True)


# The requests a page of another origin can make a browser send with the cookie: forms (no
# custom header, no JSON content type without a preflight).
FORM = {"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://127.0.0.1:1"}
CHANGING = [
    ("POST", f"/v1/schedules/{SCHEDULE}/pause"),
    ("POST", f"/v1/schedules/{SCHEDULE}/stop"),
    ("DELETE", f"/v1/schedules/{SCHEDULE}"),
    ("PATCH", f"/v1/schedules/{SCHEDULE}"),
    ("POST", "/v1/schedules"),
    ("POST", "/v1/imports?format=csv"),
    ("POST", "/v1/store/load?drop=true"),
    ("POST", "/v1/tokens"),
]


@pytest.mark.parametrize(("method", "path"), CHANGING)
def test_the_cookie_of_an_admin_token_changes_nothing(api, method, path):
    # A browser that holds an admin token's cookie (an admin signed in on the page)
    rt = api.runtime
    before = schedules(rt)
    response = api.anonymous.request(
        method, path, headers={**FORM, "Cookie": f"{COOKIE}={api.admin_token}"}, content=b"x=1"
    )
    assert response.status_code == 401, response.text
    assert schedules(rt) == before
    assert active(rt)


def test_the_cookie_still_reads(api):
    cookie = {"Cookie": f"{COOKIE}={api.read_token}"}
    assert api.anonymous.get("/v1/status", headers=cookie).status_code == 200
    assert 'id="runs"' in api.anonymous.get("/", headers=cookie).text


def test_the_login_form_takes_read_and_admin_tokens_and_refuses_unknown_ones(api):
    refused = api.anonymous.post("/login", data={"token": "cs_nobody_nothing"})
    assert refused.status_code == 303 and refused.headers["location"] == "/?failed"
    assert "set-cookie" not in refused.headers
    for token, age in ((api.read_token, 30 * 86400), (api.admin_token, 12 * 3600)):
        taken = api.anonymous.post("/login", data={"token": token})
        assert taken.status_code == 303 and taken.headers["location"] == "/"
        cookie = taken.headers["set-cookie"]
        assert f"{COOKIE}={token}" in cookie and f"Max-Age={age}" in cookie
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    # The page names its role; only an admin's carries a CSRF token for its buttons.
    read = api.anonymous.get("/", headers={"Cookie": f"{COOKIE}={api.read_token}"})
    admin = api.anonymous.get("/", headers={"Cookie": f"{COOKIE}={api.admin_token}"})
    assert 'name="crawlsched-role" content="read"' in read.text
    assert 'name="crawlsched-csrf" content=""' in read.text
    assert 'name="crawlsched-role" content="admin"' in admin.text
    assert 'name="crawlsched-csrf" content=""' not in admin.text
    # No page may be framed by another (the buttons could be clicked through a frame).
    assert admin.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in admin.headers["content-security-policy"]


def _chrome_available() -> bool:
    from crawlsched.demo.node import LocalChromedriver

    return LocalChromedriver.available()


class _Attacker(BaseHTTPRequestHandler):
    """Serves one page that auto-submits a form to `target` (set on the class)."""

    target = ""
    method = "post"

    def do_GET(self) -> None:
        page = (
            f'<form method="{self.method}" action="{self.target}"><input name="x" value="1">'
            "</form><script>document.forms[0].submit()</script>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.skipif(not _chrome_available(), reason="chromedriver is not installed")
def test_a_form_on_another_port_cannot_pause_a_schedule_in_a_real_browser(api):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from crawlsched.drivers.browser_session import chrome_options

    rt = api.runtime
    pages = ThreadingHTTPServer(("127.0.0.1", 0), _Attacker)
    threading.Thread(target=pages.serve_forever, daemon=True).start()
    attacker = f"http://127.0.0.1:{pages.server_address[1]}/"
    service = Service(
        shutil.which("chromedriver"),
        service_args=["--allowed-ips=127.0.0.1"],
        env={**os.environ, "TMPDIR": str(scratch_dir("chrome-"))},
    )
    browser = webdriver.Chrome(service=service, options=chrome_options())
    try:
        # Given a browser holding the page's cookie with an admin token in it
        browser.get(f"{api.url}/health")
        browser.add_cookie(
            {"name": COOKIE, "value": api.admin_token, "httpOnly": True, "sameSite": "Strict"}
        )
        # The cookie does travel from the other port's page (a GET form reads with it)
        _Attacker.target, _Attacker.method = f"{api.url}/v1/stats", "get"
        browser.get(attacker)
        wait_for(lambda: browser.current_url.startswith(api.url), 30, "the GET form")
        assert "unauthenticated" not in browser.page_source
        # When the other port's page auto-submits a form to pause the schedule
        _Attacker.target, _Attacker.method = f"{api.url}/v1/schedules/{SCHEDULE}/pause", "post"
        browser.get(attacker)
        wait_for(lambda: browser.current_url.startswith(api.url), 30, "the POST form")
        wait_for(lambda: "status" in browser.page_source, 30, "the API's answer")
        # Then the schedule is still active
        assert active(rt)
        assert "unauthenticated" in browser.page_source
    finally:
        browser.quit()
        pages.shutdown()
        pages.server_close()
