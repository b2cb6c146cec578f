"""The API's HTTP server: uvicorn with the slow-client limits of the settings."""

from __future__ import annotations

from typing import Any

import uvicorn

from crawlsched.api.slow_clients import SlowClientLimits, guarded_protocol
from crawlsched.settings import Settings


def limits_of(settings: Settings) -> SlowClientLimits:
    return SlowClientLimits(
        header_timeout_s=settings.api_header_timeout_s,
        body_timeout_s=settings.api_body_timeout_s,
        max_per_client=settings.api_max_connections_per_client,
    )


def api_server(app: Any, host: str, port: int, settings: Settings) -> uvicorn.Server:
    """A uvicorn server for `app` whose connections keep the settings' read time limits and
    per-client cap (`api/slow_clients.py`); `.run()` serves until SIGTERM or SIGINT."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="off",
        http=guarded_protocol(limits_of(settings)),
    )
    return uvicorn.Server(config)
