"""The proxy pool in the store gauges: capacity of the active proxies, leases held, proxies by
state (a zero series for each state, so that "none cooling" is a reading, not a gap)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import mongomock

from crawlsched.metrics import readings
from crawlsched.metrics.store_gauges import StoreCollector
from tests.test_metrics_flow import gauges

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
LATER = NOW + timedelta(minutes=5)


def _proxy(name: str, **fields) -> dict:
    base = {"url": "http://127.0.0.1:3128", "group": "dc", "max_concurrent": 2, "leases": []}
    return {"_id": name, **base, "enabled": True, "secret_enc": "x", **fields}


LEASES = [{"id": "proxy.1", "expires_at": LATER}, {"id": "proxy.0", "expires_at": NOW}]
PROXIES = [
    _proxy("a", leases=LEASES),  # one live lease, one expired
    _proxy("b", cooling_until=LATER, failures=2, max_concurrent=5),
    _proxy("c", enabled=False, max_concurrent=7),
    _proxy("d", cooling_until=NOW - timedelta(seconds=1)),  # its rest is over
]


def test_proxy_pool_counts_the_active_proxies_capacity_and_the_live_leases():
    slots, states = readings.proxy_pool(PROXIES, NOW)
    assert slots == {("proxy", ""): (2 + 2, 1)}
    assert states == {"active": 2, "cooling": 1, "disabled": 1}
    none = dict.fromkeys(("active", "cooling", "disabled"), 0)
    assert readings.proxy_pool([], NOW) == ({("proxy", ""): (0, 0)}, none)


def test_store_gauges_export_the_proxy_pool_and_proxies_by_state():
    db = mongomock.MongoClient(tz_aware=True).db
    read = gauges(StoreCollector(lambda: db, lambda: NOW))
    assert read[("crawlsched_proxies", (("state", "cooling"),))] == 0  # a series with no proxy
    assert read[("crawlsched_pool_capacity", (("media", ""), ("pool", "proxy")))] == 0

    db.proxies.insert_many([dict(p) for p in PROXIES])
    read = gauges(StoreCollector(lambda: db, lambda: NOW))
    pool = (("media", ""), ("pool", "proxy"))
    assert read[("crawlsched_pool_capacity", pool)] == 4
    assert read[("crawlsched_pool_leases_held", pool)] == 1
    assert read[("crawlsched_pool_open_slots", pool)] == 3
    assert read[("crawlsched_waiting_batches", pool)] == 0
    for state, n in {"active": 2, "cooling": 1, "disabled": 1}.items():
        assert read[("crawlsched_proxies", (("state", state),))] == n
    assert read[("crawlsched_store_up", ())] == 1
