"""Hostile pages at the fetch level, against a server on 127.0.0.1: each ends with a DriverError
subclass whose message says why, within bounded time, and without holding the whole body.

The bounds are small here (1 MB, a 1.5 s deadline) so that each case is cheap; the server's
side stops as soon as the client hangs up.
"""

from __future__ import annotations

import gzip
import time
import tracemalloc
import zlib

import httpx
import pytest

from crawlsched.drivers.base import DriverError
from crawlsched.drivers.fetching import FetchFailed, PoliteHttp
from crawlsched.drivers.http import html_of
from crawlsched.drivers.targets import parse_networks
from tests.support.hostile import StreamingHandler
from tests.support.serving import running

LOOPBACK = parse_networks(["127.0.0.1/32"])
MAX_BYTES = 1_000_000
DEADLINE_S = 1.5
BOMB = gzip.compress(b"\0" * 200_000_000)  # ~200 kB on the wire, 200 MB inflated


class Hostile(StreamingHandler):
    def do_GET(self) -> None:
        self.server.seen.append(self.path)
        if self.path == "/big":  # 50 MB, streamed
            self._head(200, "text/html", 50_000_000)
            chunk = b"x" * 65_536
            for _ in range(50_000_000 // len(chunk)):
                if not self._write(chunk):
                    return
        elif self.path == "/trickle":  # a byte every 0.1 s, never done
            self._head(200, "text/html", 10_000_000)
            for _ in range(600):
                if not self._write(b"x"):
                    return
                time.sleep(0.1)
        elif self.path == "/stall":  # the head, then silence
            self._head(200, "text/html", 1000)
            self.server.stop.wait(30)
        elif self.path == "/loop":
            self._head(302, "text/html", 0, {"Location": "/loop"})
        elif self.path == "/bomb":
            self._head(200, "text/html", len(BOMB), {"Content-Encoding": "gzip"})
            self._write(BOMB)
        elif self.path == "/gzip":
            body = gzip.compress(b"<html><title>small</title></html>")
            self._head(200, "text/html", len(body), {"Content-Encoding": "gzip"})
            self._write(body)
        elif self.path == "/stacked":  # deflate applied first, then gzip: listed in that order
            body = gzip.compress(zlib.compress(b"<html><title>stacked</title></html>"))
            self._head(200, "text/html", len(body), {"Content-Encoding": "deflate, gzip"})
            self._write(body)
        elif self.path == "/binary":
            body = bytes(range(256)) * 100
            self._head(200, "application/octet-stream", len(body))
            self._write(body)
        elif self.path == "/broken":
            body = b"<html><title>caf\xe9 \xff\xfe</title><body>ok</body></html>"
            self._head(200, "text/html; charset=utf-8", len(body))
            self._write(body)


@pytest.fixture
def site():
    import threading

    stop = threading.Event()
    with running(Hostile, seen=[], stop=stop) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}", server
        stop.set()


def _http(client: httpx.Client) -> PoliteHttp:
    return PoliteHttp(client, allowed_networks=LOOPBACK, max_bytes=MAX_BYTES, deadline_s=DEADLINE_S)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/big", f"larger than {MAX_BYTES} bytes"),
        ("/bomb", f"larger than {MAX_BYTES} bytes once decompressed"),
        ("/trickle", f"not finished within {DEADLINE_S} s"),
        ("/stall", f"not finished within {DEADLINE_S} s"),
        ("/loop", "more than 5 redirects"),
    ],
)
def test_hostile_response_ends_with_a_reason_in_bounded_time_and_memory(site, path, reason):
    base, _ = site
    tracemalloc.start()
    started = time.monotonic()
    try:
        # A client timeout far beyond the deadline: the deadline, not the timeout, ends it.
        with httpx.Client(timeout=60) as client, pytest.raises(FetchFailed) as caught:
            _http(client).get(f"{base}{path}")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reason in str(caught.value)
    assert isinstance(caught.value, DriverError)
    assert peak < 20 * MAX_BYTES  # never the 50 MB page nor the 200 MB inflated bomb
    assert time.monotonic() - started < 20  # generous: bounded, not fast


def test_redirect_loop_stops_after_the_redirect_limit(site):
    base, server = site
    with httpx.Client(timeout=10) as client, pytest.raises(FetchFailed):
        _http(client).get(f"{base}/loop")
    assert server.seen == ["/loop"] * 6  # the request and five redirects, then no more


def test_non_html_is_refused_by_the_driver_check(site):
    base, _ = site
    with httpx.Client(timeout=10) as client:
        response = _http(client).get(f"{base}/binary")
    with pytest.raises(DriverError, match=r"not HTML \(application/octet-stream\)"):
        html_of(response, f"{base}/binary")


def test_broken_encoding_decodes_with_replacement(site):
    base, _ = site
    with httpx.Client(timeout=10) as client:
        response = _http(client).get(f"{base}/broken")
    page = html_of(response, f"{base}/broken")
    assert page.css("title::text").get() == "caf\ufffd \ufffd\ufffd"
    assert page.css("body::text").get() == "ok"


def test_gzip_within_the_budget_is_decoded(site):
    # The bounded decoder replaced httpx's own: ordinary compressed pages still read.
    base, _ = site
    with httpx.Client(timeout=10) as client:
        response = _http(client).get(f"{base}/gzip")
    assert html_of(response, f"{base}/gzip").css("title::text").get() == "small"
    assert "content-encoding" not in response.headers


def test_stacked_content_encodings_are_undone_in_reverse_order(site):
    base, _ = site
    with httpx.Client(timeout=10) as client:
        response = _http(client).get(f"{base}/stacked")
    assert html_of(response, f"{base}/stacked").css("title::text").get() == "stacked"
    assert "content-encoding" not in response.headers
