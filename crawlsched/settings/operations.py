"""What an operator runs and watches: logs, metrics, retention, the data directory and the API."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator

from crawlsched.settings.values import (
    LOG_LEVELS,
    MAX_RETAIN_S,
    default_data_dir,
    split_address,
)


class OperationSettings(BaseModel):
    """Part of `Settings` (CRAWLSCHED_* from the environment): see the README's settings table."""

    log_format: Literal["auto", "json", "console"] = "auto"
    log_level: str = "INFO"
    metrics_enabled: bool = Field(
        True, description="Count Prometheus metrics in `dramatiq` worker processes."
    )
    metrics_dir: Path = Field(
        Path(tempfile.gettempdir()) / "crawlsched-prometheus",
        description="prometheus-client multiprocess directory of one worker group (one per "
        "`dramatiq` command on a host); cleared when the group starts.",
    )
    metrics_address: str = Field(
        "127.0.0.1:9191",
        description="host:port of the worker group's exporter (actor and crawlsched metrics).",
    )
    clock_metrics_address: str | None = Field(
        None, description="host:port where `crawlsched clock` serves its metrics; unset: none."
    )
    drain_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="On SIGTERM a `dramatiq` worker takes no more messages; each batch starts no "
        "page, records those in flight and gives the rest back to wait. A worker still busy "
        "this long after the signal exits 1 (its batches are then redelivered). Keep it below "
        "Kubernetes' terminationGracePeriodSeconds or compose's stop_grace_period.",
    )
    worker_heartbeat_file: Path | None = Field(
        None,
        description="Each `dramatiq` worker process (and `crawlsched clock`) writes its "
        "heartbeat to this path plus `.<pid>`, for `python -m crawlsched.probe live|ready`; "
        "unset: none.",
    )
    worker_heartbeat_s: float = Field(
        5.0,
        gt=0,
        le=600,
        allow_inf_nan=False,
        description="How often the heartbeat is written; the probe calls one older than six "
        "times this stale.",
    )
    api_metrics_address: str | None = Field(
        None,
        description="host:port where `crawlsched api serve` serves its metrics (requests by "
        "method and status), apart from the API and without a token; unset: none.",
    )
    metrics_store_gauges: bool = Field(
        True,
        description="The clock's exporter also serves gauges read from MongoDB at scrape time "
        "(due jobs, waiting batches, leases, nodes, accounts, open runs).",
    )
    retain_discovered_s: float = Field(
        7 * 86400.0,
        ge=1,
        le=MAX_RETAIN_S,
        allow_inf_nan=False,
        description="A run's discovered pages (job documents) are kept this long after the "
        "run ended, then removed by a TTL index; imported jobs are never removed.",
    )
    retain_history_s: float = Field(
        30 * 86400.0,
        ge=1,
        le=MAX_RETAIN_S,
        allow_inf_nan=False,
        description="Task history rows are kept this long after their execution ended.",
    )
    retain_activity_s: float = Field(
        30 * 86400.0,
        ge=1,
        le=MAX_RETAIN_S,
        allow_inf_nan=False,
        description="Events (the activity feed) are kept this long after they were stored, "
        "or, on RabbitMQ, after they were published.",
    )
    retain_deliveries_s: float = Field(
        7 * 86400.0,
        ge=1,
        le=MAX_RETAIN_S,
        allow_inf_nan=False,
        description="Webhook deliveries are kept this long after the receiver took them "
        "(pending ones are kept until then).",
    )
    retain_idempotency_s: float = Field(
        86400.0,
        ge=1,
        le=MAX_RETAIN_S,
        allow_inf_nan=False,
        description="An API idempotency key (and the answer it replays) is kept this long.",
    )
    ttl_sweep_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="How often the standalone server removes expired documents (a MongoDB "
        "server's own TTL monitor runs every 60 s).",
    )
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where `crawlsched standalone` keeps its data (a MongoDB dump) and writes "
        "its API address and a local admin token for the command line.",
    )
    snapshot_interval_s: float = Field(
        2.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="The standalone server writes a snapshot of what changed to its data "
        "directory this often; its journal holds the writes since (and is cut there).",
    )
    journal_fsync_ms: float = Field(
        50.0,
        gt=0,
        le=10_000,
        allow_inf_nan=False,
        description="The standalone server's journal is flushed to disk (fsync) this often: "
        "what a power loss can lose (a kill -9 loses nothing the journal was handed; a write "
        "the API answered is always flushed first).",
    )
    api_host: str = Field("127.0.0.1", description="Address the API listens on.")
    api_port: int = Field(8080, ge=0, le=65535, description="Port of the API (0: any free one).")
    api_url: str | None = Field(
        None,
        description="A running API (e.g. http://127.0.0.1:8080): every CLI command goes "
        "through it instead of reaching MongoDB itself.",
    )
    api_token: SecretStr | None = Field(None, description="The bearer token for api_url.")
    api_max_body_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        le=1024**3,
        description="The largest request body the API reads (JSON routes and the login form); "
        "a larger one is answered 413, an unauthenticated one 401 before any of it is read.",
    )
    api_token_cache_s: float = Field(
        2.0,
        ge=0,
        le=60,
        allow_inf_nan=False,
        description="The API remembers a verified token this long (0: not at all), so a token "
        "revoked by another process is refused at the latest this long after; a revoke in the "
        "server's own process is refused on the next request.",
    )
    api_max_upload_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        le=4 * 1024**3,
        description="The largest file a caller sends the API (`crawlsched jobs import`, "
        "`store load`); a larger one is answered 413.",
    )
    api_max_unpacked_bytes: int = Field(
        1024**3,
        ge=1024,
        le=1024**4,
        description="The most a dump unpacks to: on the server for `store load`, on the caller "
        "for `store dump`; past it the unpacking stops and the command fails.",
    )

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.upper() not in LOG_LEVELS:
            raise ValueError(
                f"log_level must be one of {', '.join(LOG_LEVELS)}, got {value[:40]!r}"
            )
        return value.upper()

    @field_validator("metrics_address", "clock_metrics_address", "api_metrics_address")
    @classmethod
    def _host_port(cls, value: str | None, info) -> str | None:
        if value is not None:
            split_address(value, info.field_name)
        return value
