"""The API's Prometheus metrics: requests counted by an ASGI middleware, served apart.

`crawlsched api serve` serves them on `CRAWLSCHED_API_METRICS_ADDRESS` (its own port, like the
clock's exporter), never on the API's port: the API needs a token on every route but /health,
and an exporter is scraped without one. Labels are closed sets: the method, and the status
code's class (`2xx` … `5xx`), never a path.
"""

from __future__ import annotations

import time

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    start_http_server,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from crawlsched.settings import split_address

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class ApiMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "crawlsched_api_requests_total",
            "HTTP requests the API answered, by method and status class (2xx … 5xx).",
            ["method", "status"],
            registry=registry,
        )
        self.duration = Histogram(
            "crawlsched_api_request_duration_seconds",
            "Time from a request's arrival to the end of its answer.",
            registry=registry,
        )

    def answered(self, method: str, status: int, seconds: float) -> None:
        method = method if method in METHODS else "other"
        self.requests.labels(method, f"{status // 100}xx").inc()
        self.duration.observe(max(seconds, 0.0))


class CountRequests:
    """ASGI middleware: `app.add_middleware(CountRequests, metrics=...)`. A request whose
    connection closed before an answer began counts with status 499 (as nginx logs it)."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.monotonic(), 499

        async def counted_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counted_send)
        except Exception:
            status = 500 if status == 499 else status
            raise
        finally:
            self.metrics.answered(scope["method"], status, time.monotonic() - started)


def serve_api_metrics(address: str) -> ApiMetrics:
    """Start the API's exporter on `address` (a thread); returns what the API counts."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    metrics = ApiMetrics(registry)
    host, port = split_address(address, "api_metrics_address")
    start_http_server(port, addr=host, registry=registry)
    return metrics
