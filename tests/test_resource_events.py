"""What operators must see of the pools and hosts reaches `activity`, once per change: an
account banned (by the site or an operator), a node lost (by the probe or under a batch) and
back, a host blocked after a 429/503. Never a secret. On the embedded store, times injected."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from crawlsched.crawl.resources import node_lost
from crawlsched.errors import NodeUnreachable
from crawlsched.flow.nodes import probe_nodes
from crawlsched.flow.resource_events import ban_account_by_lease, set_account_status
from crawlsched.politeness.pacer import HostNotReady
from crawlsched.resources.node_status import CHROMEDRIVER, NodeStatus
from crawlsched.resources.rules import AccountLimits
from crawlsched.runtime import Runtime
from tests.conftest import settings_for_tests

NOW = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
SECRET = "hunter2-password"
LIMITS = AccountLimits(max_concurrent=2, cooldown_s=5.0, rate_uses=3, rate_window_s=60.0)
NODE = "http://node-a:9515"


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def rt(embedded_mongo_url, clock):
    rt = Runtime(
        settings_for_tests(mongo_url=embedded_mongo_url, broker_url="stub://"), clock=clock
    )
    rt.create_indexes()
    return rt


def _events(rt: Runtime, name: str) -> list[dict]:
    # What the event says, without its bookkeeping (ids, when, when it expires).
    hidden = {"_id": 0, "event_id": 0, "at": 0, "expire_at": 0}
    return list(rt.db.activity.find({"event": name}, hidden))


def test_an_account_the_site_refused_is_banned_with_one_event(rt):
    rt.inventory.add_account("twitter", "bob", SECRET, LIMITS, NOW)
    lease = {"id": "account.b", "holder": "d1", "expires_at": NOW + timedelta(minutes=5)}
    rt.db.accounts.update_one({"username": "bob"}, {"$set": {"leases": [lease]}})

    ban_account_by_lease(rt, "account.b", "login rejected: 401")
    ban_account_by_lease(rt, "account.b", "login rejected again")  # already banned
    ban_account_by_lease(rt, "account.unknown", "no such lease")

    events = _events(rt, "AccountBanned")
    assert events == [
        {
            "event": "AccountBanned",
            "media": "twitter",
            "username": "bob",
            "reason": "login rejected: 401",
            "by": "site",
        }
    ]
    assert SECRET not in str(list(rt.db.activity.find()))


def test_an_operator_ban_emits_once_and_other_changes_none(rt):
    rt.inventory.add_account("twitter", "alice", SECRET, LIMITS, NOW)

    set_account_status(rt, "twitter", "alice", "disabled", "holiday")
    account = set_account_status(rt, "twitter", "alice", "banned", "spam reports")
    set_account_status(rt, "twitter", "alice", "banned", "still banned")
    set_account_status(rt, "twitter", "alice", "active", None)
    set_account_status(rt, "twitter", "alice", "banned", "again")

    assert account["status"] == "banned" and account["previous_status"] == "disabled"
    assert [(e["reason"], e["by"]) for e in _events(rt, "AccountBanned")] == [
        ("spam reports", "operator"),
        ("again", "operator"),
    ]


def test_a_node_lost_under_a_batch_emits_once(rt):
    rt.inventory.add_node(NODE, CHROMEDRIVER, 1, NOW)

    node_lost(rt, NODE, "browser session lost: WebDriverException")
    node_lost(rt, NODE, "browser session lost again")

    assert _events(rt, "NodeLost") == [
        {
            "event": "NodeLost",
            "node": NODE,
            "reason": "browser session lost: WebDriverException",
            "detected_by": "crawl",
            "leases_revoked": 0,
        }
    ]


def test_a_node_the_probe_finds_down_emits_once_and_once_more_when_back(rt, clock):
    rt.inventory.add_node(NODE, CHROMEDRIVER, 1, NOW)
    answers = iter(["down", "down", "up", "up"])

    def probe(url: str) -> NodeStatus:
        if next(answers) == "down":
            raise NodeUnreachable(url, "connection refused")
        return NodeStatus(CHROMEDRIVER, True, None, 0, "ok")

    for _ in range(4):
        clock.now += timedelta(seconds=rt.settings.node_probe_interval_s + 1)
        probe_nodes(rt, probe, lambda keys: None)

    [lost] = _events(rt, "NodeLost")
    assert (lost["node"], lost["detected_by"]) == (NODE, "probe")
    assert "connection refused" in lost["reason"]
    assert _events(rt, "NodeRecovered") == [{"event": "NodeRecovered", "node": NODE}]


def test_a_host_blocked_after_a_429_emits_once_per_block(rt, clock):
    key = "http://shop.example"
    for _ in range(2):  # a second 429 while blocked extends the block: no new event
        with pytest.raises(HostNotReady):
            rt.pacer.observe(key, 429, "120")

    [blocked] = _events(rt, "HostBlocked")
    assert blocked["host"] == key
    assert blocked["reason"] == "HTTP 429, Retry-After 120"
    assert blocked["until"].replace(tzinfo=UTC) >= NOW + timedelta(seconds=120)

    # Once the block is over, the next 503 is a new block
    clock.now = blocked["until"].replace(tzinfo=UTC) + timedelta(seconds=1)
    with pytest.raises(HostNotReady):
        rt.pacer.observe(key, 503, None)
    assert [e["reason"] for e in _events(rt, "HostBlocked")][1] == "HTTP 503"
