"""How the API server holds up against slow clients: read time limits and a connection cap."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ServingSettings(BaseModel):
    """Part of `Settings` (CRAWLSCHED_* from the environment): see the README's settings table."""

    api_header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        allow_inf_nan=False,
        description="A request's headers must have arrived whole this long after its first "
        "byte (or the connection's opening); otherwise 408 and the connection is closed.",
    )
    api_body_timeout_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="A request's body must have arrived whole this long after its headers; "
        "otherwise 408 (or, once an answer began, the connection is closed).",
    )
    api_max_connections_per_client: int = Field(
        32,
        ge=0,
        le=100_000,
        description="Connections one client address may hold open at once; more are answered "
        "503 and closed (0: no cap). Behind a proxy every client has the proxy's address: cap "
        "there, and raise or switch off this one.",
    )
