"""The run page's buttons act only with an admin's cookie, from the page's own origin, with
the page's CSRF token: each condition alone refused, judged by the run in the store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.api.auth import COOKIE
from crawlsched.api.page_guard import csrf_matches, csrf_token, same_origin
from tests.support.api import ApiServer, serving

RUN = "sweep-websites@20260101T000000.000Z"


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServer]:
    with serving("mongomock://page-actions") as server:
        at = datetime(2026, 1, 1, tzinfo=UTC)
        server.runtime.runs.open(RUN, "sweep-websites", at, at)
        yield server


def paused(api: ApiServer) -> bool:
    return bool(api.runtime.runs.get(RUN).get("paused"))


def press(api: ApiServer, action: str = "pause", **given: str | None) -> int:
    """POST the button's route as a browser would, with what `given` changes of the page's
    own request (`token`, `origin`, `csrf`, `fetch_site`; None leaves the header out)."""
    host = api.url.removeprefix("http://")
    token = given.get("token", api.admin_token)
    headers = {
        "Host": host,
        "Origin": given.get("origin", api.url),
        "Sec-Fetch-Site": given.get("fetch_site", "same-origin"),
        "X-Crawlsched-Csrf": given.get("csrf", csrf_token(token) if token else None),
        "Cookie": f"{COOKIE}={token}" if token else None,
    }
    sent = {k: v for k, v in headers.items() if v is not None}
    return api.anonymous.post(f"/status/runs/{RUN}/{action}", headers=sent).status_code


@pytest.mark.parametrize(
    ("given", "status"),
    [
        ({"origin": "http://127.0.0.1:1"}, 403),  # another port of this host: same site
        ({"origin": "null"}, 403),
        ({"origin": None}, 403),
        ({"fetch_site": "same-site"}, 403),
        ({"csrf": None}, 403),
        ({"csrf": "0" * 64}, 403),
        ({"token": None}, 401),
        ({"token": "cs_nobody_nothing"}, 401),
        ({"read_token": True}, 403),
    ],
    ids=[
        "other-port-origin",
        "null-origin",
        "no-origin",
        "cross-site-fetch",
        "no-csrf",
        "wrong-csrf",
        "no-cookie",
        "unknown-token",
        "read-token",
    ],
)
def test_a_button_press_missing_one_condition_changes_nothing(api, given, status):
    if given.pop("read_token", False):
        given["token"] = api.read_token
    assert press(api, **given) == status
    assert not paused(api)


def test_the_page_s_own_press_pauses_the_run_and_an_unknown_action_is_404(api):
    assert press(api, action="explode") == 404
    assert press(api) == 200
    assert paused(api)


@given(st.text(min_size=1, max_size=80), st.text(max_size=80))
def test_a_csrf_token_matches_its_own_token_only(token, other):
    assert csrf_matches(token, csrf_token(token))
    assert not csrf_matches(token, other) or other == csrf_token(token)
    assert not csrf_matches(token, None)


@pytest.mark.parametrize(
    ("headers", "same"),
    [
        ({"origin": "http://h:8080", "host": "h:8080"}, True),
        ({"origin": "https://crawl.example", "host": "CRAWL.example"}, True),
        ({"origin": "http://h:8081", "host": "h:8080"}, False),
        ({"origin": "http://h", "host": "h:8080"}, False),
        ({"origin": "http://h:8080", "host": "h:8080", "sec-fetch-site": "same-site"}, False),
        ({"host": "h:8080", "sec-fetch-site": "same-origin"}, False),
        ({"origin": "null", "host": "h:8080"}, False),
    ],
)
def test_same_origin_reads_origin_host_and_fetch_site(headers, same):
    assert same_origin(headers) is same
