"""The API's metrics: every request counted by method and status class, served on an address
of their own (CRAWLSCHED_API_METRICS_ADDRESS) without a token, never on the API's port."""

from __future__ import annotations

import httpx
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from crawlsched.api import create_app
from crawlsched.api.metrics import ApiMetrics
from tests.support.api import seeded_runtime
from tests.support.ports import free_port
from tests.support.workers import crawlsched_env
from tests.test_api_serve import api_serve


def _count(registry: CollectorRegistry, method: str, status: str) -> float:
    labels = {"method": method, "status": status}
    return registry.get_sample_value("crawlsched_api_requests_total", labels) or 0.0


def test_api_metrics_count_requests_by_method_and_status_class(embedded_mongo_url):
    registry = CollectorRegistry()
    app = create_app(seeded_runtime(embedded_mongo_url), metrics=ApiMetrics(registry))
    with TestClient(app) as client:
        assert client.get("/health").status_code == 200
        assert client.get("/health").status_code == 200
        # Refused by the route's token check, and by the body guard before any route ran.
        assert client.get("/v1/stats").status_code == 401
        assert client.post("/v1/schedules", content=b"{}").status_code == 401
        assert client.request("BREW", "/health").status_code == 405
        assert client.get("/metrics").status_code in (401, 404)  # not on the API's port
    assert _count(registry, "GET", "2xx") == 2
    assert _count(registry, "GET", "4xx") == 2
    assert _count(registry, "POST", "4xx") == 1
    assert _count(registry, "other", "4xx") == 1
    assert registry.get_sample_value("crawlsched_api_request_duration_seconds_count") == 6


def test_api_serve_exports_its_metrics_on_their_own_address(embedded_mongo_url):
    address = f"127.0.0.1:{free_port()}"
    env = crawlsched_env(
        "stub://", embedded_mongo_url, "api", CRAWLSCHED_API_METRICS_ADDRESS=address
    )
    with api_serve(env) as url:
        assert httpx.get(f"{url}/v1/stats").status_code == 401
        exported = httpx.get(f"http://{address}/metrics", timeout=10)
    assert exported.status_code == 200
    text = exported.text
    assert 'crawlsched_api_requests_total{method="GET",status="4xx"} 1.0' in text
    assert "process_resident_memory_bytes" in text
