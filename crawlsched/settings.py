"""One frozen Settings object, parsed at the edges (CLI, broker setup) from CRAWLSCHED_* env."""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from crawlsched.catalog import MAX_BATCH_JOBS

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# The longest retention a setting accepts: ten years.
MAX_RETAIN_S = 10 * 365 * 86400.0
# What Debian's chromium asks for on every session although its flags say not to: the component
# updater's essential components, and the account reconciler of a build with Google API keys.
SILENCED_HOSTS = ("accounts.google.com", "update.googleapis.com")
_HOST_NAME = re.compile(
    r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+"
)
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def default_data_dir() -> Path:
    """$XDG_DATA_HOME/crawlsched, or ~/.local/share/crawlsched."""
    import os

    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "crawlsched"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CRAWLSCHED_", frozen=True, extra="ignore")

    mongo_url: str = Field(
        "mongomock://",
        description="mongodb://… for a real server; mongomock:// for the embedded store.",
    )
    mongo_db: str = "crawlsched"
    broker_url: str = Field(
        "stub://",
        description="amqp://user:pass@host:5672/vhost for RabbitMQ (several nodes of a cluster: "
        "their URLs joined by ';', tried in order); stub:// in-process.",
    )
    broker_spread: bool = Field(
        False,
        description="With several node URLs, each process starts at a different one (by its "
        "process id), so connections and the queues their processes declare first spread over "
        "the cluster instead of all landing on the first node. Off by default: see the README's "
        "cluster section.",
    )
    queue_type: Literal["classic", "quorum"] = Field(
        "classic",
        description="Queues crawlsched declares: classic (one node) or quorum (replicated over "
        "a RabbitMQ cluster; survives the loss of a minority of nodes).",
    )
    quorum_delivery_limit: int = Field(
        20,
        ge=1,
        le=1000,
        description="quorum queues: a message handed out this many times without an ack "
        "(its worker died each time) is dead-lettered instead of redelivered forever.",
    )
    publisher_confirms: bool = Field(
        True,
        description="Wait for RabbitMQ to confirm every message it was sent (a send it does not "
        "confirm fails loudly and is retried instead of being lost without a trace).",
    )
    reference_file: Path | None = Field(
        None, description="YAML of models, media and tasks; the packaged default when unset."
    )

    clock_interval_s: float = Field(
        5.0, gt=0, le=3600, allow_inf_nan=False, description="Seconds between two clock ticks."
    )
    misfire_grace_s: float | None = Field(
        None,
        gt=0,
        le=86400,
        allow_inf_nan=False,
        description="A fire time seen later than this is a misfire (its schedule's misfire "
        "policy decides); unset: three clock intervals.",
    )
    schedule_horizon_days: float = Field(
        3.0, gt=0, le=31, allow_inf_nan=False, description="Default horizon of upcoming runs."
    )
    default_batch_limit: int = Field(
        100, ge=1, le=MAX_BATCH_JOBS, description="Jobs per batch when core_tasks has none."
    )
    dispatch_lease_s: float = Field(
        900.0,
        gt=0,
        le=7 * 86400,
        allow_inf_nan=False,
        description="How long a claimed batch may stay running before it is reclaimed.",
    )
    resource_lease_s: float = Field(
        900.0,
        gt=0,
        le=7 * 86400,
        allow_inf_nan=False,
        description="TTL of an account or Selenium-node lease.",
    )
    crawl_time_limit_s: float = Field(
        600.0,
        gt=0,
        le=86400,
        allow_inf_nan=False,
        description="dramatiq TimeLimit for one crawl message (one batch).",
    )
    max_attempts: int = Field(
        5, ge=1, le=1000, description="Failed attempts after which a job is exhausted."
    )
    backoff_base_s: float = Field(
        60.0,
        gt=0,
        le=7 * 86400,
        allow_inf_nan=False,
        description="First retry delay; doubles per attempt.",
    )
    backoff_max_s: float = Field(
        6 * 3600.0,
        gt=0,
        le=30 * 86400,
        allow_inf_nan=False,
        description="Ceiling of the retry delay.",
    )
    run_attempts: int = Field(
        3,
        ge=1,
        le=100,
        description="Tries one run gives a page whose crawl the machinery failed (a worker "
        "killed, a dispatch reclaimed); past them the page is given up and the run ends "
        "incomplete. Not counted in max_attempts: it is not the page's failure.",
    )
    redo_backoff_s: float = Field(
        5.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="Wait before a run tries such a page again; doubles per try, at most 300 s.",
    )
    http_timeout_s: float = Field(20.0, gt=0, le=600, allow_inf_nan=False)
    dns_cache_s: float = Field(
        60.0,
        ge=0,
        le=86400,
        allow_inf_nan=False,
        description="How long a worker process remembers a crawled host's addresses (each "
        "page's target check and connection read the same answer); 0: ask every time.",
    )
    connect_timeout_s: float = Field(
        5.0,
        gt=0,
        le=120,
        allow_inf_nan=False,
        description="How long a command, clock or worker waits for MongoDB or RabbitMQ to "
        "answer before it reports the service unreachable.",
    )
    driver_modules: list[str] = Field(
        default_factory=list,
        description="Extra modules imported at start-up that register crawl drivers (plug-ins).",
    )
    max_claim_per_sweep: int = Field(
        0,
        ge=0,
        le=10_000_000,
        description="At most this many jobs claimed by one firing of a schedule (0: no cap); "
        "the rest stay due for the next one.",
    )
    host_delay_s: float = Field(
        1.0,
        ge=0,
        le=60,
        allow_inf_nan=False,
        description="At least this long between the starts of two requests to one host, across "
        "every worker of the cluster (a media's `politeness` or `crawlsched hosts set` may say "
        "otherwise; a robots.txt Crawl-delay raises it).",
    )
    host_concurrency: int = Field(
        2,
        ge=1,
        le=64,
        description="At most this many requests at once to one host, across the cluster.",
    )
    host_daily_pages: int = Field(
        0, ge=0, description="At most this many requests to one host per UTC day (0: no cap)."
    )
    host_grouping: Literal["origin", "domain", "address"] = Field(
        "origin",
        description="What one politeness clock covers: an origin (scheme, host, port), a "
        "registrable domain (every subdomain of example.co.uk together), or the IP address a "
        "host resolves to (every name one machine serves). Every worker must use the same.",
    )
    host_lease_s: float = Field(
        10.0,
        gt=0,
        le=600,
        allow_inf_nan=False,
        description="A worker process holds a host for slices this long (renewed while it "
        "crawls it and nobody else asks): its threads pace the host with no store round trip.",
    )
    host_max_sleep_s: float = Field(
        5.0,
        ge=0,
        le=600,
        allow_inf_nan=False,
        description="A crawl thread waits at most this long for a host; a host not ready by then "
        "(held elsewhere, blocked by a 429, paced slower) gets the rest of the batch back to "
        "wait for it, and the thread takes other work. Never more than a third of "
        "CRAWLSCHED_DISPATCH_LEASE_S (a sleeping thread renews nothing).",
    )
    crawl_lanes: int = Field(
        4,
        ge=1,
        le=32,
        description="Jobs of one batch crawled at once, when its driver allows it (the plain "
        "HTTP drivers, for batches with no account and no browser): one worker thread keeps "
        "this many requests going, each still paced by its host's delay and concurrency, "
        "instead of one page after another. 1: one at a time.",
    )
    robots_txt: bool = Field(True, description="Honour each site's robots.txt.")
    robots_ttl_s: float = Field(
        3600.0,
        gt=0,
        le=7 * 86400,
        allow_inf_nan=False,
        description="A site's robots.txt is fetched once per this period for the whole cluster.",
    )
    user_agent: str = Field(
        "crawlsched/1",
        min_length=1,
        max_length=200,
        description="The User-Agent of crawl requests (robots.txt rules are read for it).",
    )
    max_page_bytes: int = Field(
        5_000_000,
        ge=1_000,
        le=1_000_000_000,
        description="A response larger than this ends its job (failed, with the reason).",
    )
    page_deadline_s: float = Field(
        30.0,
        gt=0,
        le=600,
        allow_inf_nan=False,
        description="A response not wholly received within this long ends its job.",
    )
    browser_proxy: bool = Field(
        True,
        description="Route browser sessions through the worker's filtering proxy, so that what "
        "a page loads by itself is held to the crawl target rules. The proxy listens on "
        "127.0.0.1: a node on another host cannot reach it (switch it off there, and give the "
        "node its own egress rules).",
    )
    discovery_flush_s: float = Field(
        0.5,
        ge=0,
        le=3600,
        allow_inf_nan=False,
        description="A batch that has found pages hands them to its run at most this often "
        "while it goes on (its crawled part recorded and reported, the rest crawled under a new "
        "dispatch id), so what its first pages link to is crawled by other threads meanwhile; "
        "0: only when the batch ends.",
    )
    crawl_max_depth: int = Field(
        0,
        ge=0,
        le=1000,
        description="How many links deep a run follows what its crawls discover, for a media "
        "whose reference row sets no `max_depth` (0: such a media discovers nothing; the "
        "discoveries are counted as cut).",
    )
    crawl_max_pages: int = Field(
        10_000,
        ge=0,
        le=10_000_000,
        description="At most this many discovered pages per run (unless the media says).",
    )
    recrawl_inc_rate: float = Field(
        0.4,
        gt=0,
        le=10,
        allow_inf_nan=False,
        description="Adaptive recrawl: a job whose crawl found nothing changed waits this "
        "fraction longer next time (unless its media's `recrawl` says).",
    )
    recrawl_dec_rate: float = Field(
        0.1,
        gt=0,
        lt=1,
        allow_inf_nan=False,
        description="Adaptive recrawl: a job whose crawl found a change waits this fraction "
        "less next time (unless its media's `recrawl` says).",
    )
    recrawl_jitter: float = Field(
        0.1,
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description="Adaptive recrawl: each next visit moves by up to this fraction of the "
        "interval, either way, so jobs started together drift apart.",
    )
    secret_key: SecretStr | None = Field(
        None,
        description="Fernet key that encrypts account secrets at rest "
        "(`crawlsched accounts keygen` makes one). Needed by commands and workers that touch "
        "a secret.",
    )
    message_signing_key: SecretStr | None = Field(
        None,
        min_length=32,
        description="When set, every message is signed (HMAC-SHA256) and one with a missing or "
        "bad signature is dead-lettered; the same key on every process.",
    )
    admission_wait_s: float | None = Field(
        None,
        gt=0,
        le=7 * 86400,
        allow_inf_nan=False,
        description="How long a batch may wait for an account or node before it is starved; "
        "unset: its schedule's interval.",
    )
    node_probe_interval_s: float = Field(
        15.0, gt=0, le=3600, allow_inf_nan=False, description="Seconds between node health probes."
    )
    node_probe_timeout_s: float = Field(
        5.0, gt=0, le=120, allow_inf_nan=False, description="Timeout of one node probe."
    )
    browser_host_resolver_rules: str | None = Field(
        None,
        description="Chrome --host-resolver-rules for crawl sessions, e.g. "
        "'MAP * ~NOTFOUND , EXCLUDE 127.0.0.1' to let a test browser resolve loopback only.",
    )
    browser_silenced_hosts: list[str] = Field(
        default_factory=lambda: list(SILENCED_HOSTS),
        description="Hosts a crawl session's Chrome asks by itself although every flag says "
        "not to (Debian's chromium: its updater and account reconciler): Chrome neither sends "
        "them to the proxy nor resolves them, so a page cannot load them either. [] for a media "
        "whose pages need one (e.g. a Google sign-in).",
    )
    page_load_timeout_s: float = Field(
        30.0, gt=0, le=600, allow_inf_nan=False, description="A browser page's load timeout."
    )
    stop_check_s: float = Field(
        1.0,
        gt=0,
        le=60,
        allow_inf_nan=False,
        description="A crawl re-reads whether its run was stopped at most this often (seconds).",
    )
    webhook_timeout_s: float = Field(
        10.0, gt=0, le=120, allow_inf_nan=False, description="Timeout of one webhook POST."
    )
    target_allow_networks: list[str] = Field(
        default_factory=list,
        description="Networks (CIDR) crawl targets may resolve to although private, loopback "
        "or link-local, e.g. 127.0.0.1/32 for a local test site; none by default.",
    )
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
        description="The standalone server writes changed data to its data directory this often: "
        "a kill -9 loses at most this much of the latest writes.",
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
        description="The largest body of `POST /v1/cli` (a command with the files it reads).",
    )

    @property
    def misfire_grace(self) -> timedelta:
        return timedelta(seconds=self.misfire_grace_s or 3 * self.clock_interval_s)

    @field_validator("target_allow_networks")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for text in value:
            try:
                ipaddress.ip_network(text.strip(), strict=False)
            except ValueError:
                raise ValueError(f"target_allow_networks: not a network: {text[:60]!r}") from None
        return value

    @field_validator("browser_silenced_hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        # They go into Chrome's switches: a name only, never rule or list syntax.
        for name in value:
            if not _HOST_NAME.fullmatch(name):
                raise ValueError(f"browser_silenced_hosts: not a host name: {name[:80]!r}")
        return [name.lower() for name in value]

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.upper() not in LOG_LEVELS:
            raise ValueError(
                f"log_level must be one of {', '.join(LOG_LEVELS)}, got {value[:40]!r}"
            )
        return value.upper()

    @field_validator("driver_modules")
    @classmethod
    def _importable(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _MODULE.fullmatch(name):
                raise ValueError(f"driver_modules: not a module name: {name[:80]!r}")
            try:
                found = importlib.util.find_spec(name) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                raise ValueError(f"driver_modules: no module named {name!r}")
        return value

    @field_validator("mongo_url")
    @classmethod
    def _known_mongo_scheme(cls, value: str) -> str:
        if not value.startswith(("mongodb://", "mongodb+srv://", "mongomock://")):
            raise ValueError(
                "mongo_url must start with mongodb://, mongodb+srv:// or mongomock://, "
                f"got {value!r}"
            )
        return value

    @field_validator("broker_url")
    @classmethod
    def _known_broker_scheme(cls, value: str) -> str:
        urls = split_broker_urls(value)
        for url in urls:
            if not url.startswith(("amqp://", "amqps://", "stub://")):
                raise ValueError(
                    f"broker_url must start with amqp://, amqps:// or stub://, got {url[:100]!r}"
                )
        if len(urls) > 1 and any(url.startswith("stub://") for url in urls):
            raise ValueError("broker_url: stub:// cannot be one of several node URLs")
        return value

    @property
    def broker_urls(self) -> list[str]:
        """The node URLs of `broker_url` (one, or a cluster's) in the order this process tries
        them: from a node of its own when `broker_spread` is on."""
        urls = split_broker_urls(self.broker_url)
        return spread_nodes(urls, os.getpid()) if self.broker_spread else urls

    @field_validator("metrics_address", "clock_metrics_address")
    @classmethod
    def _host_port(cls, value: str | None, info) -> str | None:
        if value is not None:
            split_address(value, info.field_name)
        return value

    @field_validator("backoff_max_s")
    @classmethod
    def _ceiling_above_base(cls, value: float, info) -> float:
        base = info.data.get("backoff_base_s")
        if base is not None and value < base:
            raise ValueError(f"backoff_max_s ({value}) must be >= backoff_base_s ({base})")
        return value


def split_broker_urls(value: str) -> list[str]:
    """`a;b;c` → its URLs: the separator dramatiq's RabbitmqBroker takes for a cluster's nodes."""
    return [url.strip() for url in value.split(";") if url.strip()] or [value]


def spread_nodes(urls: list[str], offset: int) -> list[str]:
    """`urls` rotated to start at `offset` (mod their number): every process tries every node,
    in the same cyclic order, but processes with different offsets start at different nodes."""
    if not urls:
        return []
    start = offset % len(urls)
    return urls[start:] + urls[:start]


def split_address(value: str, field: str = "address") -> tuple[str, int]:
    """`host:port` (IPv6 as `[::1]:9191`) → (host, port); ValueError naming the field."""
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{field} must be host:port with a port 1-65535, got {value!r}")
    return host, int(port)


def settings_error(error: ValidationError | SettingsError) -> str:
    """One line naming the first bad setting by its environment variable, and why."""
    if isinstance(error, SettingsError):
        found = re.search(r'field "(\w+)"', str(error))
        field = found.group(1).upper() if found else "*"
        return f"invalid setting CRAWLSCHED_{field}: not valid JSON (lists are written as JSON)"
    first = error.errors(include_url=False, include_input=False)[0]
    field = str(first["loc"][0]) if first["loc"] else "settings"
    more = error.error_count() - 1
    tail = f" (and {more} more)" if more else ""
    message = first["msg"].removeprefix("Value error, ")
    return f"invalid setting CRAWLSCHED_{field.upper()}: {message}{tail}"


def load_settings_or_exit() -> Settings:
    """Settings from the environment, or one line on stderr and exit status 2."""
    try:
        return Settings()
    except (ValidationError, SettingsError) as e:
        print(settings_error(e), file=sys.stderr)
        raise SystemExit(2) from None
