"""Slow clients cannot hold the API: real sockets against a real standalone server.

- 300 connections that sent half a request (spread over 20 client addresses, under the cap)
  stay open while an authorised request answers as it does without them, and are answered
  408 and closed once the header time limit passes;
- one address gets no more than its cap of connections: the others are answered 503 at once;
- a body that stops coming is answered 408 after the body time limit.
The latencies measured are printed (`-s`); the assertions are on what each socket saw.
"""

from __future__ import annotations

import json
import socket
import statistics
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.api.client_slots import ClientSlots
from tests.support.standalone import Standalone, standalone_env
from tests.support.waiting import wait_for

HEADER_TIMEOUT_S, BODY_TIMEOUT_S, CAP = 30, 3, 16
HALF_A_REQUEST = b"GET /v1/runs HTTP/1.1\r\nHost: crawlsched\r\nUser-Agent: slow"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, str]]:
    env = standalone_env(
        tmp_path_factory.mktemp("slow") / "data",
        CRAWLSCHED_API_HEADER_TIMEOUT_S=str(HEADER_TIMEOUT_S),
        CRAWLSCHED_API_BODY_TIMEOUT_S=str(BODY_TIMEOUT_S),
        CRAWLSCHED_API_MAX_CONNECTIONS_PER_CLIENT=str(CAP),
    )
    with Standalone(env) as standalone:
        api = json.loads((standalone.data_dir / "api.json").read_text())
        yield api["url"], api["token"]


def slow_connection(url: str, source: str) -> socket.socket:
    """A connection from `source` (a loopback address) that sent half a request."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect((host, int(port)))
    sock.sendall(HALF_A_REQUEST)
    sock.setblocking(False)
    return sock


def seen(sock: socket.socket) -> str:
    """`open`, or the status the server answered before it closed (`closed`: none)."""
    try:
        data = sock.recv(4096)
    except BlockingIOError:
        return "open"
    except ConnectionResetError:
        return "closed"
    return data.split(b" ")[1].decode() if data.startswith(b"HTTP/1.1 ") else "closed"


def latencies_ms(url: str, token: str, n: int = 30) -> list[float]:
    took = []
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        for _ in range(n):
            started = time.perf_counter()
            assert client.get(f"{url}/v1/runs").status_code == 200
            took.append((time.perf_counter() - started) * 1000)
    return took


def test_an_authorised_request_answers_while_300_slow_connections_are_open(server):
    url, token = server
    baseline = latencies_ms(url, token)
    # Given 300 half-sent requests from 20 addresses (15 each, under the cap of 16)
    sources = [f"127.0.0.{10 + i % 20}" for i in range(300)]
    slow = [slow_connection(url, source) for source in sources]
    try:
        wait_for(lambda: all(seen(s) == "open" for s in slow), 30, "300 open connections")
        # When an authorised client asks, it is answered
        loaded = latencies_ms(url, token)
        assert Counter(seen(s) for s in slow) == {"open": 300}, "they were still open"
        print(
            f"\nauthorised GET /v1/runs, median of 30: {statistics.median(baseline):.1f} ms "
            f"alone, {statistics.median(loaded):.1f} ms with 300 slow connections open "
            f"(max {max(baseline):.1f} / {max(loaded):.1f} ms)"
        )
        # Then, past the header time limit, every one of them is answered 408 and closed
        answers: dict[int, str] = {}

        def all_answered() -> bool:
            for index, sock in enumerate(slow):
                if index not in answers and (state := seen(sock)) != "open":
                    answers[index] = state
            return len(answers) == len(slow)

        wait_for(all_answered, HEADER_TIMEOUT_S + 90, "the slow connections to be closed")
        assert Counter(answers.values()) == {"408": 300}
    finally:
        for sock in slow:
            sock.close()


def test_one_address_holds_no_more_than_its_cap(server):
    url, token = server
    slow = [slow_connection(url, "127.0.0.5") for _ in range(3 * CAP)]
    try:
        states: list[str] = []

        def settled() -> bool:
            states[:] = [seen(s) for s in slow]
            return states.count("open") <= CAP

        wait_for(settled, 30, f"all but {CAP} connections to be refused")
        counts = Counter(states)
        assert counts["open"] == CAP
        assert counts["503"] + counts["closed"] == 2 * CAP and counts["503"] > 0, counts
        # Another address is served meanwhile
        assert latencies_ms(url, token, n=1)
    finally:
        for sock in slow:
            sock.close()
    # And the address gets its slots back once its connections are gone
    wait_for(lambda: _one_request_from(url, token, "127.0.0.5") == 200, 30, "its slots back")


def _one_request_from(url: str, token: str, source: str) -> int:
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=30) as client:
        return client.get(
            f"{url}/v1/runs", headers={"Authorization": f"Bearer {token}"}
        ).status_code


def test_a_body_that_stops_coming_is_answered_408(server):
    url, token = server
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            b"POST /v1/runs HTTP/1.1\r\nHost: crawlsched\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {token}\r\nContent-Length: 100\r\n\r\n".encode()
            + b'{"schedule_id": '
        )
        sock.settimeout(BODY_TIMEOUT_S + 60)
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"body did not arrive within" in answer


@settings(deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.booleans()), max_size=60), st.integers(0, 4))
def test_client_slots_hold_at_most_the_cap_per_address(operations, cap):
    slots, model = ClientSlots(cap), Counter()
    for address, taking in operations:
        if taking:
            took = slots.take(address)
            assert took == (cap == 0 or model[address] < cap)
            model[address] += took
        elif model[address]:
            slots.give_back(address)
            model[address] -= 1
        assert slots.held(address) == model[address]
        assert len(slots) == sum(1 for n in model.values() if n)
