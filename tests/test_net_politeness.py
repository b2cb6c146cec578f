"""Per-host politeness and robots.txt, judged by what a server on 127.0.0.1 saw: its own
arrival times and its own request log, not the client's clock."""

from __future__ import annotations

import itertools
import threading
import time
from http.server import BaseHTTPRequestHandler

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.drivers import politeness
from crawlsched.drivers.fetching import PoliteHttp, RobotsDisallowed
from crawlsched.drivers.politeness import HostPacer
from crawlsched.drivers.robots import RobotsCache
from crawlsched.drivers.targets import parse_networks
from tests.support.serving import running

LOOPBACK = parse_networks(["127.0.0.1/32"])


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@given(
    delay=st.floats(0, 5, allow_nan=False),
    work=st.lists(st.floats(0, 3, allow_nan=False), min_size=1, max_size=20),
)
def test_pacer_spaces_request_starts_on_one_host(delay, work):
    clock = FakeClock()
    pacer = HostPacer(delay, 1, clock=clock, sleep=clock.sleep)
    starts = []
    for seconds in work:
        with pacer.slot("example.org"):
            starts.append(clock.now)
            clock.sleep(seconds)  # the request itself
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert all(gap >= delay - 1e-9 for gap in gaps)


@given(
    delay=st.floats(0, 5, allow_nan=False),
    requests=st.lists(
        st.tuples(st.sampled_from(["a.org", "b.org", "A.org"]), st.floats(0, 3, allow_nan=False)),
        min_size=1,
        max_size=30,
    ),
)
def test_pacer_waits_only_for_the_same_host_and_exactly_the_delay(delay, requests):
    clock = FakeClock()
    pacer = HostPacer(delay, 1, clock=clock, sleep=clock.sleep)
    last: dict[str, float] = {}
    for host, gap in requests:
        clock.sleep(gap)  # time passes between requests
        asked = clock.now
        with pacer.slot(host):
            started = clock.now
        expected = max(asked, last.get(host.lower(), float("-inf")) + delay)
        assert started == pytest.approx(expected)  # no wait for another host, none extra
        last[host.lower()] = started


def test_forgotten_hosts_are_only_those_whose_delay_has_passed(monkeypatch):
    monkeypatch.setattr(politeness, "MAX_IDLE_SLOTS", 3)
    clock = FakeClock()
    pacer = HostPacer(10.0, 1, clock=clock, sleep=clock.sleep)
    with pacer.slot("a.org"):
        pass
    for i in range(5):  # more hosts than remembered, all still within their delay
        with pacer.slot(f"h{i}.org"):
            pass
    clock.now = 1.0
    with pacer.slot("a.org"):
        assert clock.now == 10.0  # a.org was kept: its next request still waited
    clock.now = 100.0  # every delay has passed: idle hosts go when a new one comes
    with pacer.slot("new.org"):
        pass
    assert len(pacer) == 1


@given(max_per_host=st.integers(1, 4), threads=st.integers(1, 8))
def test_pacer_never_exceeds_its_concurrency_cap(max_per_host, threads):
    pacer = HostPacer(0.0, max_per_host)
    lock, active, peak = threading.Lock(), [0], [0]
    barrier = threading.Barrier(threads)

    def request() -> None:
        barrier.wait(timeout=30)
        with pacer.slot("example.org"):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            time.sleep(0.002)
            with lock:
                active[0] -= 1

    workers = [threading.Thread(target=request) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=30)
    assert 1 <= peak[0] <= max_per_host and active[0] == 0


def test_pacer_caps_concurrency_per_host_across_threads():
    pacer = HostPacer(0.0, 2)
    lock, active, peak = threading.Lock(), [0], [0]

    def request() -> None:
        with pacer.slot("Example.org"):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            time.sleep(0.01)
            with lock:
                active[0] -= 1

    threads = [threading.Thread(target=request) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert peak[0] == 2


class _Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.log.append((time.monotonic(), self.path))
        if self.path == "/robots.txt":
            status, body = self.server.robots
        else:
            status, body = 200, b"<html>ok</html>"
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def site():
    robots = (200, b"User-agent: *\nDisallow: /private\n")
    with running(_Site, log=[], robots=robots) as server:
        yield server


def _base(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_delay_between_requests_holds_in_the_servers_own_log(site):
    # The server's arrival times also carry each request's own travel time, which varies on a
    # busy machine: the delay is large against that, and only a lower bound is asserted.
    pacer = HostPacer(0.4, 4)
    with httpx.Client(timeout=10) as client:
        http = PoliteHttp(client, allowed_networks=LOOPBACK, pacer=pacer)
        threads = [
            threading.Thread(target=http.get, args=(f"{_base(site)}/p{i}",)) for i in range(5)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    arrivals = sorted(at for at, _ in site.log)
    assert len(arrivals) == 5
    assert all(b - a >= 0.4 - 0.05 for a, b in itertools.pairwise(arrivals))


def test_robots_disallow_is_honoured_and_robots_txt_is_read_once(site):
    with httpx.Client(timeout=10) as client:
        http = PoliteHttp(client, allowed_networks=LOOPBACK, robots=RobotsCache())
        for path in ("/a", "/b"):
            assert http.get(f"{_base(site)}{path}").status_code == 200
        with pytest.raises(RobotsDisallowed):
            http.get(f"{_base(site)}/private/page")
    paths = [path for _, path in site.log]
    assert paths == ["/robots.txt", "/a", "/b"]  # never /private, robots.txt once


@pytest.mark.parametrize(("status", "allowed"), [(404, True), (503, False)])
def test_robots_unavailable_follows_rfc_9309(site, status, allowed):
    site.robots = (status, b"")
    with httpx.Client(timeout=10) as client:
        http = PoliteHttp(client, allowed_networks=LOOPBACK, robots=RobotsCache())
        if allowed:
            http.get(f"{_base(site)}/x")
        else:
            with pytest.raises(RobotsDisallowed):
                http.get(f"{_base(site)}/x")
    assert ("/x" in [p for _, p in site.log]) is allowed
