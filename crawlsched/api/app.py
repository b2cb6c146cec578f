"""Build the FastAPI application around one runtime (and, optionally, a broker that delivers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from crawlsched import __version__
from crawlsched.api import openapi, problems
from crawlsched.api.auth import verify_token
from crawlsched.api.body_guard import BodyGuard
from crawlsched.api.routes import (
    crawls,
    files,
    history,
    hosts,
    jobs,
    media,
    page,
    page_actions,
    proxies,
    resources,
    run_control,
    runs,
    schedules,
    system,
    tokens,
)
from crawlsched.api.run_rows import EncodedRows
from crawlsched.api.token_cache import TokenCache
from crawlsched.runtime import Runtime
from crawlsched.schedules.upcoming import FireTimeCache

if TYPE_CHECKING:
    from crawlsched.api.metrics import ApiMetrics

HealthCheck = Callable[[], dict[str, Any]]


def _guarded(check: Callable[[], Any]) -> HealthCheck:
    def run() -> dict[str, Any]:
        try:
            detail = check()
        except Exception as e:  # a health check reports every failure, whatever it is
            return {
                "ok": False,
                "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
            }
        return {"ok": True, **({"detail": detail} if detail else {})}

    return run


def default_health_checks(rt: Runtime) -> dict[str, HealthCheck]:
    from crawlsched.services import check_broker

    def mongo() -> str:
        rt.db.raw.client.admin.command("ping")
        return "embedded" if rt.settings.mongo_url.startswith("mongomock://") else ""

    def broker() -> str:
        if rt.settings.broker_url.startswith("stub://"):
            return "in-process"
        import pika

        from crawlsched.services import bounded_pika_parameters

        parameters = [pika.URLParameters(url) for url in rt.settings.broker_urls]
        bounded_pika_parameters(parameters, rt.settings.connect_timeout_s)
        check_broker(rt.settings, parameters)
        return ""

    return {"mongodb": _guarded(mongo), "broker": _guarded(broker)}


def create_app(
    runtime: Runtime,
    delivers: bool = False,
    health_checks: dict[str, HealthCheck] | None = None,
    metrics: ApiMetrics | None = None,
) -> FastAPI:
    """The API over `runtime`. `delivers`: messages sent from this process reach workers (a
    real broker, or the standalone's in-process worker); without it, starting and stopping
    runs answers 503. `metrics`: every request is counted there (`api/metrics.py`)."""
    app = FastAPI(
        title="crawlsched",
        version=__version__,
        description="Schedules, runs, jobs, task history, pools and activity of crawlsched. "
        "Every route but /health needs a bearer token (`crawlsched tokens create`).",
    )
    app.state.runtime = runtime
    app.state.delivers = delivers
    app.state.health_checks = health_checks or default_health_checks(runtime)
    problems.install(app)

    app.state.token_cache = TokenCache(runtime.settings.api_token_cache_s)
    app.state.run_rows = EncodedRows()
    app.state.fire_times = FireTimeCache()

    def verify(token: str) -> dict[str, Any] | None:
        # The store opens on the first request, not here.
        return verify_token(app, token)

    app.add_middleware(
        BodyGuard,
        verify=verify,
        max_body_bytes=runtime.settings.api_max_body_bytes,
        max_upload_bytes=runtime.settings.api_max_upload_bytes,
    )
    if metrics is not None:
        from crawlsched.api.metrics import CountRequests

        # Added last, so outermost: the guard's own refusals (401, 413) are counted too.
        app.add_middleware(CountRequests, metrics=metrics)
    modules = (
        system, schedules, runs, run_control, crawls, jobs, history, resources, proxies, hosts,
        media, tokens, files, page, page_actions,
    )  # fmt: skip
    routers = [m.router for m in modules]
    for router in routers:
        app.include_router(router)
    openapi.install(app, runtime, routers)
    return app
