"""Everything an actor needs in one process: settings, stores, pools, drivers and the clock.

Built lazily on first use, in the process that uses it: the dramatiq CLI forks its workers after
importing the actors, and a MongoDB client must not cross a fork.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

import httpx

from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.drivers import registry
from crawlsched.drivers.browser_proxy import FilteringProxy
from crawlsched.drivers.fetching import PoliteHttp
from crawlsched.drivers.net import guarded_client
from crawlsched.drivers.proxied import ProxyClients, ProxyWatch
from crawlsched.drivers.targets import CachingResolver, Resolver, parse_networks, resolve
from crawlsched.environment import SYSTEM, Environment
from crawlsched.events import RabbitmqEventPublisher, emit, publisher_for
from crawlsched.logs import get_logger
from crawlsched.planning.outcomes import RedoPolicy, RetryPolicy
from crawlsched.planning.recrawl import RecrawlPolicy, policy_of
from crawlsched.planning.retention import Retention
from crawlsched.politeness.pacer import ClusterHostPacer
from crawlsched.politeness.robots import SharedRobots
from crawlsched.reference_cache import ReferenceCache
from crawlsched.resources.backends.mongo import MongoLeaseBackend
from crawlsched.resources.host_grouping import first_address
from crawlsched.resources.host_rules import HostPolicy, merge_policy
from crawlsched.resources.inventory import MongoPoolInventory
from crawlsched.resources.pools import ResourcePools
from crawlsched.resources.proxy_health import Backoff
from crawlsched.resources.proxy_inventory import MongoProxyInventory
from crawlsched.resources.proxy_tiers import TierPolicy
from crawlsched.resources.secrets import SecretBox
from crawlsched.settings import Settings
from crawlsched.store.activity import MongoActivityStore
from crawlsched.store.assignments import MongoAssignmentStore
from crawlsched.store.children import MongoChildStore
from crawlsched.store.client import open_database
from crawlsched.store.counting import CommandCounter, CountingDatabase
from crawlsched.store.deliveries import MongoDeliveryStore
from crawlsched.store.held_jobs import MongoHeldJobStore
from crawlsched.store.history import MongoHistoryStore
from crawlsched.store.hosts import MongoHostStore
from crawlsched.store.idempotency import MongoIdempotencyStore
from crawlsched.store.jobs import MongoJobStore
from crawlsched.store.missed_runs import MongoMissedRunStore
from crawlsched.store.reference import MongoReferenceStore
from crawlsched.store.results import MongoResultStore
from crawlsched.store.runs import MongoRunStore
from crawlsched.store.schedules import MongoScheduleStore
from crawlsched.store.tokens import MongoTokenStore
from crawlsched.store.waiting import MongoWaitingStore
from crawlsched.view_cache import ViewCache

# How long a batch waits for a resource when neither the settings nor its schedule say.
FALLBACK_WAIT_S = 300.0


def utc_now() -> datetime:
    return datetime.now(UTC)


class Runtime(ReferenceCache):
    def __init__(
        self,
        settings: Settings,
        counter: CommandCounter | None = None,
        clock: Callable[[], datetime] | None = None,
        env: Environment = SYSTEM,
    ) -> None:
        self.settings = settings
        self.counter = counter or CommandCounter()
        # Time, sleep, locks and threads of the crawl core (`environment`): the system's, or a
        # simulation's. `clock` alone replaces the wall clock (tests).
        self.env = env
        self.now = clock or env.now
        ReferenceCache.__init__(self, env.monotonic)
        self._wait_by_schedule: dict[str | None, float] = {}
        # Views worth reusing for a moment (flow/views.py: a running run's pages per depth).
        self.view_cache = ViewCache(env)
        registry.load_plugins(settings.driver_modules)

    @property
    def worker_id(self) -> str:
        """host:pid of this process (not cached: the dramatiq CLI forks after import)."""
        return f"{socket.gethostname()}:{os.getpid()}"

    @cached_property
    def db(self) -> CountingDatabase:
        return open_database(
            self.settings.mongo_url,
            self.settings.mongo_db,
            self.counter,
            self.settings.connect_timeout_s,
        )

    def jobs(self, collection: str) -> MongoJobStore:
        if collection not in JOB_COLLECTIONS:
            raise ValueError(f"unknown job collection {collection!r}; known: {JOB_COLLECTIONS}")
        return MongoJobStore(self.db, collection)

    def children(self, collection: str) -> MongoChildStore:
        """The discovered children of a job collection's runs."""
        if collection not in JOB_COLLECTIONS:
            raise ValueError(f"unknown job collection {collection!r}; known: {JOB_COLLECTIONS}")
        return MongoChildStore(self.db, collection)

    def held_jobs(self, collection: str) -> MongoHeldJobStore:
        """Jobs of a collection that wait in their run (paused, or tagged for retry-failed)."""
        if collection not in JOB_COLLECTIONS:
            raise ValueError(f"unknown job collection {collection!r}; known: {JOB_COLLECTIONS}")
        return MongoHeldJobStore(self.db, collection)

    @cached_property
    def activity(self) -> MongoActivityStore:
        return MongoActivityStore(self.db)

    @cached_property
    def runs(self) -> MongoRunStore:
        return MongoRunStore(self.db)

    @cached_property
    def schedules(self) -> MongoScheduleStore:
        return MongoScheduleStore(self.db)

    @cached_property
    def missed_runs(self) -> MongoMissedRunStore:
        return MongoMissedRunStore(self.db)

    @cached_property
    def reference(self) -> MongoReferenceStore:
        return MongoReferenceStore(self.db)

    @cached_property
    def results(self) -> MongoResultStore:
        return MongoResultStore(self.db)

    @cached_property
    def tokens(self) -> MongoTokenStore:
        return MongoTokenStore(self.db)

    @cached_property
    def idempotency(self) -> MongoIdempotencyStore:
        return MongoIdempotencyStore(self.db, timedelta(seconds=self.retention.idempotency_s))

    @cached_property
    def retention(self) -> Retention:
        s = self.settings
        return Retention(
            discovered_s=s.retain_discovered_s,
            history_s=s.retain_history_s,
            activity_s=s.retain_activity_s,
            deliveries_s=s.retain_deliveries_s,
            idempotency_s=s.retain_idempotency_s,
        )

    @cached_property
    def deliveries(self) -> MongoDeliveryStore:
        return MongoDeliveryStore(self.db, self.retention)

    @cached_property
    def http(self) -> httpx.Client:
        """One HTTP client per process for the drivers: building one costs ~30 ms (its TLS
        context), far too much per batch. httpx clients are safe to share between threads."""
        return guarded_client(
            self.allowed_networks, self.settings.http_timeout_s, resolver=self.resolver
        )

    @cached_property
    def proxy_clients(self) -> ProxyClients:
        """The clients through the proxies this process's batches lease (`drivers.proxied`)."""
        return ProxyClients(self.settings.http_timeout_s)

    @cached_property
    def resolver(self) -> Resolver:
        """The crawl's name resolution, one cache per process (`dns_cache_s`)."""
        ttl_s = self.settings.dns_cache_s
        return CachingResolver(ttl_s=ttl_s) if ttl_s > 0 else resolve

    def polite_http(
        self,
        account: Any,
        secret_hosts: tuple[str, ...],
        on_request: Callable[[], None] | None = None,
        politeness: Mapping[str, Any] | None = None,
        proxy: tuple[httpx.Client, ProxyWatch] | None = None,
    ) -> PoliteHttp:
        """A batch's HTTP client for its drivers, on the process's shared connection pool or
        through its leased proxy (`proxy`: that proxy's client, and the batch's watch on it);
        `politeness` is its media's (delay_s, concurrency, daily_pages) over the settings'."""
        settings = self.settings
        return PoliteHttp(
            self.http if proxy is None else proxy[0],
            proxy=None if proxy is None else proxy[1],
            allowed_networks=self.allowed_networks,
            account=account,
            secret_hosts=secret_hosts,
            pacer=self.pacer,
            robots=self.robots,
            user_agent=settings.user_agent,
            max_bytes=settings.max_page_bytes,
            deadline_s=settings.page_deadline_s,
            on_request=on_request,
            host_policy=merge_policy(self.host_policy, dict(politeness or {})),
            resolver=self.resolver,
            monotonic=self.env.monotonic,
        )

    @cached_property
    def host_policy(self) -> HostPolicy:
        """The settings' politeness: every host's unless its media or an operator says."""
        s = self.settings
        return HostPolicy(s.host_delay_s, s.host_concurrency, s.host_daily_pages)

    @cached_property
    def hosts(self) -> MongoHostStore:
        return MongoHostStore(self.db)

    @cached_property
    def pacer(self) -> ClusterHostPacer:
        """Per-host politeness for the whole cluster, shared by every thread of this process."""
        s = self.settings
        return ClusterHostPacer(
            self.hosts,
            self.host_policy,
            slice_s=s.host_lease_s,
            # A thread asleep on a host renews nothing: it never sleeps past a third of the
            # dispatch lease, so its batch renews in time (a short lease, as in tests, would
            # otherwise be reclaimed from a live crawl waiting for its host).
            max_sleep_s=min(s.host_max_sleep_s, s.dispatch_lease_s / 3),
            clock=self.now,
            on_blocked=self._host_blocked,
            env=self.env,
            grouping=s.host_grouping,
            resolve=first_address(self.resolver),
            rng=self.env.random,
        )

    @cached_property
    def event_publisher(self) -> RabbitmqEventPublisher | None:
        """Where events go once stored (`events`): RabbitMQ's exchange, or nowhere on the
        in-process stub broker."""
        return publisher_for(self.settings.broker_url)

    def _host_blocked(self, host: str, until: datetime, reason: str) -> None:
        emit(self, "HostBlocked", host=host, until=until, reason=reason)

    @cached_property
    def robots(self) -> SharedRobots | None:
        if not self.settings.robots_txt:
            return None
        return SharedRobots(
            self.hosts,
            self.pacer.holder,
            self.settings.robots_ttl_s,
            self.now,
            group_of=self.pacer.key_of,
            on_crawl_delay=self.pacer.raise_delay,
            env=self.env,
        )

    def browser_options(self) -> dict[str, Any]:
        """How a batch's browser session is opened (`browser_session.open_browser`)."""
        return {
            "host_resolver_rules": self.settings.browser_host_resolver_rules,
            "page_load_timeout_s": self.settings.page_load_timeout_s,
            "proxy_url": self.browser_proxy.url if self.browser_proxy else None,
            "silenced_hosts": tuple(self.settings.browser_silenced_hosts),
        }

    @cached_property
    def browser_proxy(self) -> FilteringProxy | None:
        """The filtering proxy every browser session of this process goes through (started on
        first use, on a loopback port; it lives as long as the process)."""
        if not self.settings.browser_proxy:
            return None
        return FilteringProxy(self.allowed_networks).start()

    @cached_property
    def allowed_networks(self) -> tuple:
        """Private networks crawl targets may reach (settings; none by default)."""
        return parse_networks(self.settings.target_allow_networks)

    @cached_property
    def probe_http(self) -> httpx.Client:
        """The client Selenium nodes are probed with (a short timeout of its own), connecting
        only to addresses CRAWLSCHED_NODE_ALLOW_NETWORKS admits."""
        networks = parse_networks(self.settings.node_allow_networks)
        return guarded_client(networks, self.settings.node_probe_timeout_s)

    @cached_property
    def secrets(self) -> SecretBox:
        key = self.settings.secret_key
        return SecretBox(key.get_secret_value() if key else None)

    @cached_property
    def leases(self) -> MongoLeaseBackend:
        return MongoLeaseBackend(self.db, self.secrets)

    @cached_property
    def inventory(self) -> MongoPoolInventory:
        return MongoPoolInventory(self.db, self.secrets)

    @cached_property
    def proxies(self) -> MongoProxyInventory:
        settings = self.settings
        return MongoProxyInventory(
            self.db,
            self.secrets,
            Backoff(settings.proxy_backoff_s, settings.proxy_backoff_cap_s),
            TierPolicy(settings.proxy_escalate_after, settings.proxy_probe_after_s),
        )

    @cached_property
    def waiting(self) -> MongoWaitingStore:
        return MongoWaitingStore(self.db)

    @cached_property
    def assignments(self) -> MongoAssignmentStore:
        return MongoAssignmentStore(self.db)

    @cached_property
    def history(self) -> MongoHistoryStore:
        return MongoHistoryStore(self.db, self.retention)

    def max_wait_s(self, schedule_id: str | None) -> float:
        """How long a batch of this schedule may wait for a resource before it starves."""
        if self.settings.admission_wait_s is not None:
            return self.settings.admission_wait_s
        if schedule_id not in self._wait_by_schedule:
            schedule = self.schedules.get(schedule_id) if schedule_id else None
            interval = (schedule or {}).get("interval_s")
            ok = isinstance(interval, int | float) and 0 < interval <= 7 * 86400
            self._wait_by_schedule[schedule_id] = float(interval) if ok else FALLBACK_WAIT_S
        return self._wait_by_schedule[schedule_id]

    @cached_property
    def pools(self) -> ResourcePools:
        return ResourcePools(self.leases, self.settings.resource_lease_s)

    @cached_property
    def retry_policy(self) -> RetryPolicy:
        s = self.settings
        return RetryPolicy(s.max_attempts, s.backoff_base_s, s.backoff_max_s)

    @cached_property
    def redo_policy(self) -> RedoPolicy:
        s = self.settings
        return RedoPolicy(s.run_attempts, s.redo_backoff_s, max(300.0, s.redo_backoff_s))

    def recrawl_policy(self, media: dict[str, Any] | None) -> RecrawlPolicy:
        """The media's recrawl policy over the settings' rates; fixed when its row is unusable
        (edited in the store by hand: the reference loader never writes one)."""
        s = self.settings
        defaults = RecrawlPolicy(
            inc_rate=s.recrawl_inc_rate,
            dec_rate=s.recrawl_dec_rate,
            jitter=s.recrawl_jitter,
            method=s.recrawl_method,
            interval_per_mean=s.recrawl_interval_per_mean,
            memory=s.recrawl_memory,
        )
        try:
            return policy_of((media or {}).get("recrawl"), defaults)
        except (TypeError, ValueError) as e:
            name = (media or {}).get("media_name")
            get_logger(__name__).warning("recrawl_policy_invalid", media=name, error=str(e))
            return defaults

    def create_indexes(self) -> None:
        for collection in JOB_COLLECTIONS:
            self.jobs(collection).create_indexes()
        self.runs.create_indexes()
        self.schedules.create_indexes()
        self.missed_runs.create_indexes()
        self.reference.create_indexes()
        self.results.create_indexes()
        self.leases.create_indexes()
        self.waiting.create_indexes()
        self.assignments.create_indexes()
        self.history.create_indexes()
        self.deliveries.create_indexes()
        self.activity.create_indexes()
        self.idempotency.create_indexes()


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()
_default_settings: Settings | None = None


def configure(settings: Settings) -> None:
    """Say which settings the lazily built runtime of this process will use."""
    global _default_settings, _runtime
    with _runtime_lock:
        _default_settings = settings
        _runtime = None


def set_runtime(runtime: Runtime | None) -> None:
    global _runtime
    with _runtime_lock:
        _runtime = runtime


def get_runtime() -> Runtime:
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = Runtime(_default_settings or Settings())
        return _runtime
