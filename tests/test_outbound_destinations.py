"""Webhooks and notices reach no loopback service through any spelling of its address.

For every spelling of 127.0.0.1 (decimal, hex, octal, short forms, zero-padded parts, upper
case, names /etc/hosts gives it) and every kind of destination (a webhook; Apprise's `json://`
as POST, as a PUT carrying an injected `Authorization` header and as a DELETE; `xml://`,
`form://`, `mailto://…?smtp=`, `rsyslog://`), with receivers on 127.0.0.1 (HTTP, SMTP, UDP)
that count every connection and datagram:
- setting it on a schedule is refused, naming its redacted form and never its secret;
- a delivery of it made while loopback was allowed, sent once it is not, reaches nothing
  (0 connections) and its record says it was refused;
- the same delivery sent while loopback is allowed does reach the receiver: so each spelling
  is one that really leads there, and the 0 above is the guard's doing.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from crawlsched.errors import WebhookFailed
from crawlsched.flow import schedule_ops
from crawlsched.flow.notifying import deliver, plan_deliveries
from crawlsched.planning.run_end import RunEnd
from crawlsched.runtime import Runtime
from crawlsched.store.client import drop_embedded
from tests.conftest import settings_for_tests
from tests.support.loopback_receivers import HttpReceiver, SmtpReceiver, UdpReceiver
from tests.support.waiting import wait_for

SECRET = "s3cr3t-token-Zq9"
# A URL its sender cannot parse (httpx refuses `0177.0.0.1`, Apprise some spellings).
UNSENDABLE = ("Apprise accepts", "webhook: an http:// or https:// URL")
SPELLINGS = [
    "127.0.0.1",
    "2130706433",
    "0x7f000001",
    "017700000001",
    "0177.0.0.1",
    "127.1",
    "127.0.1",
    "127.000.000.001",
    "LOCALHOST",
    "[::ffff:127.0.0.1]",  # IPv4-mapped IPv6
]


def hosts_file_names() -> list[str]:
    """Names /etc/hosts gives 127.0.0.1 (besides localhost), that resolve to it alone."""
    names = []
    for line in Path("/etc/hosts").read_text().splitlines():
        fields = line.split("#")[0].split()
        if len(fields) > 1 and fields[0] == "127.0.0.1":
            names += [n for n in fields[1:] if n.lower() != "localhost"]
    return [n for n in names if _only_127_0_0_1(n)]


def _only_127_0_0_1(name: str) -> bool:
    try:
        return {i[4][0] for i in socket.getaddrinfo(name, 80)} == {"127.0.0.1"}
    except OSError:
        return False


@dataclass(frozen=True)
class Receivers:
    http: HttpReceiver
    smtp: SmtpReceiver
    udp: UdpReceiver

    def reached(self) -> int:
        counts = (self.http.connections, self.smtp.connections, self.udp.datagrams)
        return sum(c.count for c in counts)

    def reset(self) -> None:
        for counter in (self.http.connections, self.http.requests, self.smtp.connections):
            counter.reset()
        self.udp.datagrams.reset()


# (name, URL of the destination for a host spelling, is a webhook)
def destinations(r: Receivers) -> list[tuple[str, str, bool]]:
    h, s, u = r.http.port, r.smtp.port, r.udp.port
    return [
        ("webhook", f"http://{{host}}:{h}/hook?token={SECRET}", True),
        ("json POST", f"json://{{host}}:{h}/hook?token={SECRET}", False),
        (
            "json PUT + Authorization",
            f"json://{{host}}:{h}/hook?method=PUT&+Authorization=Bearer%20{SECRET}",
            False,
        ),
        ("json DELETE", f"json://{{host}}:{h}/hook?method=DELETE&token={SECRET}", False),
        ("xml", f"xml://{{host}}:{h}/hook?token={SECRET}", False),
        ("form", f"form://{{host}}:{h}/hook?token={SECRET}", False),
        (
            "mailto smtp=",
            f"mailto://ops:{SECRET}@crawl.example:{s}?smtp={{host}}"
            "&from=crawlsched@crawl.example&to=ops@crawl.example",
            False,
        ),
        ("rsyslog", f"rsyslog://{{host}}:{u}", False),
    ]


@pytest.fixture(scope="module")
def receivers() -> Iterator[Receivers]:
    with HttpReceiver() as http, SmtpReceiver() as smtp, UdpReceiver() as udp:
        yield Receivers(http, smtp, udp)


@pytest.fixture(scope="module")
def runtimes() -> Iterator[tuple[Runtime, Runtime]]:
    """(loopback refused, loopback allowed), over one store."""
    url = f"mongomock://outbound-{uuid.uuid4().hex}"
    refusing = Runtime(settings_for_tests(mongo_url=url, target_allow_networks=[]))
    allowing = Runtime(settings_for_tests(mongo_url=url, target_allow_networks=["127.0.0.0/8"]))
    refusing.create_indexes()
    try:
        yield refusing, allowing
    finally:
        for rt in (refusing, allowing):
            rt.http.close()
        drop_embedded(url)


def _cases() -> list[tuple[str, int]]:
    cases = [(host, index) for host in [*SPELLINGS, *hosts_file_names()] for index in range(8)]
    # smtplib and Apprise's rsyslog take no bracketed IPv6 host: allowed or not, they reach
    # nothing with one (nothing for the control to show).
    return [(host, index) for host, index in cases if not (host.startswith("[") and index >= 6)]


def _notify(url: str, webhook: bool) -> dict:
    return {"webhook": url} if webhook else {"notices": [url]}


def _schedule(rt: Runtime, url: str, webhook: bool) -> str:
    schedule_id = f"s-{uuid.uuid4().hex[:12]}"
    given = {"collections": ["websites"], "interval_s": 3600, **_notify(url, webhook)}
    schedule_ops.create(rt, schedule_id, given)
    return schedule_id


def _delivery(rt: Runtime, schedule_id: str) -> str:
    run = {"_id": f"{schedule_id}@{uuid.uuid4().hex[:8]}", "schedule_id": schedule_id}
    (delivery_id,) = plan_deliveries(rt, run, RunEnd("finished", "succeeded", "RunFinished"))
    return delivery_id


@pytest.mark.parametrize(("host", "index"), _cases())
def test_no_spelling_of_loopback_reaches_a_loopback_receiver(receivers, runtimes, host, index):
    refusing, allowing = runtimes
    name, template, webhook = destinations(receivers)[index]
    url = template.format(host=host)
    receivers.reset()

    # Setting it is refused, naming the redacted form, never the secret
    with pytest.raises(ValueError) as refused:
        _schedule(refusing, url, webhook)
    assert SECRET not in str(refused.value)
    unsendable = any(reason in str(refused.value) for reason in UNSENDABLE)
    assert "loopback" in str(refused.value) or unsendable, refused.value
    if unsendable:
        return  # a spelling its sender does not take: it can never be set, nor sent
    # Given the same destination set while loopback was allowed
    schedule_id = _schedule(allowing, url, webhook)
    blocked, control = _delivery(refusing, schedule_id), _delivery(allowing, schedule_id)

    # When it is sent now that loopback is refused, it reaches nothing
    with pytest.raises(WebhookFailed):
        deliver(refusing, blocked, refusing.http)
    record = refusing.deliveries.get(blocked)
    assert record["state"] == "pending" and "refused" in record["last_error"], record
    assert SECRET not in record["last_error"]
    assert receivers.reached() == 0, f"{name} via {host!r} reached a loopback receiver"

    # And the same delivery sent while loopback is allowed does reach it
    # (the receiver may not speak the service's whole protocol: reaching it is enough)
    with contextlib.suppress(WebhookFailed):
        deliver(allowing, control, allowing.http)
    wait_for(receivers.reached, 10, f"{name} via {host!r} to reach its receiver when allowed")


def test_the_injected_authorization_header_and_the_methods_do_reach_a_receiver_when_allowed(
    receivers, runtimes
):
    # The control for the PUT and DELETE cases: what would have arrived without the guard.
    _, allowing = runtimes
    receivers.reset()
    for index in (2, 3):
        _, template, _ = destinations(receivers)[index]
        schedule_id = _schedule(allowing, template.format(host="2130706433"), False)
        deliver(allowing, _delivery(allowing, schedule_id), allowing.http)
    wait_for(lambda: receivers.http.requests.count == 2, 10, "the PUT and the DELETE")
    methods = {method: headers for method, _, headers in receivers.http.requests.seen}
    assert set(methods) == {"PUT", "DELETE"}
    assert methods["PUT"].get("Authorization") == f"Bearer {SECRET}"


def test_the_cases_cover_names_from_etc_hosts():
    names = hosts_file_names()
    assert names, "/etc/hosts names no other host for 127.0.0.1 on this machine"
    assert all(ipaddress.ip_address(socket.gethostbyname(n)).is_loopback for n in names)


def test_no_secret_reaches_a_log_line_a_record_or_an_output(receivers, runtimes, capsys):
    """Every destination sent refused and allowed, with every log line of the process kept
    (DEBUG, structlog's and the standard library's, all written to stderr): the secret is in
    none of them, nor in a delivery record or what a reader is shown of the schedule."""
    from crawlsched.logs import configure_logging
    from crawlsched.schedules.notice_urls import public_schedule

    refusing, allowing = runtimes
    configure_logging("json", "DEBUG")  # onto this test's captured stderr
    try:
        for name, template, webhook in destinations(receivers):
            url = template.format(host="127.0.0.1")
            schedule_id = _schedule(allowing, url, webhook)
            for rt in (refusing, allowing):
                delivery_id = _delivery(rt, schedule_id)
                with contextlib.suppress(WebhookFailed):
                    deliver(rt, delivery_id, rt.http)
                record = rt.deliveries.get(delivery_id)
                assert SECRET not in repr(record), (name, record)
            shown = public_schedule(allowing.schedules.get(schedule_id))
            assert SECRET not in repr(shown) and "gAAAA" not in repr(shown["notify"]), shown
    finally:
        logged = capsys.readouterr().err
        with capsys.disabled():  # back onto the real stderr, which outlives this test
            configure_logging("json", "INFO")
    assert '"webhook_delivered"' in logged and '"notice_failed"' in logged  # lines were kept
    leaks = [line for line in logged.splitlines() if SECRET in line]
    assert not leaks, leaks[:3]
