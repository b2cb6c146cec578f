"""The clock's exporter: its own ticks, and the gauges read from the store (one place for them).

A deployment runs one clock (or two, for redundancy: set CRAWLSCHED_METRICS_STORE_GAUGES=false
on the second, or let the dashboards' `max by` fold the copies).
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from crawlsched.metrics.store_gauges import StoreCollector
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings, split_address


class ClockMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.ticks_sent = Counter(
            "crawlsched_clock_ticks_sent_total", "Ticks this clock sent.", registry=registry
        )
        self.last_tick = Gauge(
            "crawlsched_clock_last_tick_timestamp_seconds",
            "Unix time of this clock's last tick.",
            registry=registry,
        )

    def tick_sent(self) -> None:
        self.ticks_sent.inc()
        self.last_tick.set(time.time())


def serve_clock_metrics(settings: Settings, address: str) -> ClockMetrics:
    """Start the clock's exporter on `address` (a thread); returns what the clock counts."""
    registry = CollectorRegistry()
    clock_metrics = ClockMetrics(registry)
    if settings.metrics_store_gauges:
        runtime = Runtime(settings)
        registry.register(StoreCollector(lambda: runtime.db, runtime.now))
    host, port = split_address(address, "clock_metrics_address")
    start_http_server(port, addr=host, registry=registry)
    return clock_metrics
