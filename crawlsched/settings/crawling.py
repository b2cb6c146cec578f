"""How a crawl fetches: HTTP, politeness per host, robots.txt, discovery, recrawl, browsers and
the networks a target may reach."""

from __future__ import annotations

import importlib.util
from typing import Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from crawlsched.settings.values import (
    HOST_NAME,
    MODULE_NAME,
    SILENCED_HOSTS,
    checked_networks,
)


class CrawlSettings(BaseModel):
    """Part of `Settings` (CRAWLSCHED_* from the environment): see the README's settings table."""

    http_timeout_s: float = Field(20.0, gt=0, le=600, allow_inf_nan=False)
    dns_cache_s: float = Field(
        60.0,
        ge=0,
        le=86400,
        allow_inf_nan=False,
        description="How long a worker process remembers a crawled host's addresses (each "
        "page's target check and connection read the same answer); 0: ask every time.",
    )
    driver_modules: list[str] = Field(
        default_factory=list,
        description="Extra modules imported at start-up that register crawl drivers (plug-ins).",
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
    crawl_take_over: bool = Field(
        True,
        description="A running batch (no account, no browser) whose pages all wait for their "
        "hosts' turns takes over pages of other hosts from batches of its run that are still "
        "queued for a thread, one page per host that is free now; one about to be done with a "
        "paced host its process holds takes over that host's queued pages. Off: each batch "
        "crawls only the pages it was planned with.",
    )
    crawl_keep_found: bool = Field(
        True,
        description="A batch (no account, no browser) crawls the pages it found of a host its "
        "process holds and paces itself, under its next part, once its run counts them, "
        "instead of handing them to its run to be planned, batched and granted the host anew "
        "(for half of CRAWLSCHED_CRAWL_TIME_LIMIT_S at most). Off: every page found is planned.",
    )
    host_refusals_per_page: int = Field(
        8,
        ge=1,
        le=1000,
        description="A page its host answered 429 or 503 this many times in one run is given "
        "up for that run, with the reason (the run ends incomplete and names it): a host that "
        'never stops saying "not now" to a page cannot keep its run open for ever.',
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
    recrawl_method: Literal["estimate", "steps"] = Field(
        "estimate",
        description="Adaptive recrawl: `estimate` crawls each job every "
        "CRAWLSCHED_RECRAWL_INTERVAL_PER_MEAN times its page's estimated mean time between "
        "changes; `steps` multiplies its interval by the rates below (unless its media's "
        "`recrawl` says).",
    )
    recrawl_interval_per_mean: float = Field(
        2.0,
        gt=0,
        le=100,
        allow_inf_nan=False,
        description="Adaptive recrawl, `estimate`: the interval, in estimated mean times "
        "between changes of the page (unless its media's `recrawl` says).",
    )
    recrawl_memory: float = Field(
        0.95,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="Adaptive recrawl, `estimate`: how much of what earlier crawls said each "
        "crawl keeps (1: all; less forgets, following a page whose pace changes).",
    )
    recrawl_inc_rate: float = Field(
        0.4,
        gt=0,
        le=10,
        allow_inf_nan=False,
        description="Adaptive recrawl, `steps`: a job whose crawl found nothing changed waits "
        "this fraction longer next time (unless its media's `recrawl` says).",
    )
    recrawl_dec_rate: float = Field(
        0.1,
        gt=0,
        lt=1,
        allow_inf_nan=False,
        description="Adaptive recrawl, `steps`: a job whose crawl found a change waits this "
        "fraction less next time (unless its media's `recrawl` says).",
    )
    recrawl_jitter: float = Field(
        0.1,
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description="Adaptive recrawl: each next visit moves by up to this fraction of the "
        "interval, either way, so jobs started together drift apart.",
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
    webhook_timeout_s: float = Field(
        10.0, gt=0, le=120, allow_inf_nan=False, description="Timeout of one webhook POST."
    )
    target_allow_networks: list[str] = Field(
        default_factory=list,
        description="Networks (CIDR) crawl targets may resolve to although private, loopback "
        "or link-local, e.g. 127.0.0.1/32 for a local test site; none by default. Webhooks "
        "and notice servers follow the same rule.",
    )
    node_allow_networks: list[str] = Field(
        default_factory=list,
        description="Networks (CIDR) Selenium nodes may be on although private, loopback or "
        "link-local, e.g. 127.0.0.1/32 for a chromedriver on this machine; none by default.",
    )

    @field_validator("target_allow_networks", "node_allow_networks")
    @classmethod
    def _networks(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return checked_networks(str(info.field_name), value)

    @field_validator("browser_silenced_hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        # They go into Chrome's switches: a name only, never rule or list syntax.
        for name in value:
            if not HOST_NAME.fullmatch(name):
                raise ValueError(f"browser_silenced_hosts: not a host name: {name[:80]!r}")
        return [name.lower() for name in value]

    @field_validator("driver_modules")
    @classmethod
    def _importable(cls, value: list[str]) -> list[str]:
        for name in value:
            if not MODULE_NAME.fullmatch(name):
                raise ValueError(f"driver_modules: not a module name: {name[:80]!r}")
            try:
                found = importlib.util.find_spec(name) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                raise ValueError(f"driver_modules: no module named {name!r}")
        return value
