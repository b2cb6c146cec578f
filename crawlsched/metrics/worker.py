"""Metrics in `dramatiq` worker groups: turned on at process boot, served by one exporter.

`WorkerMetrics` sits in the broker's middleware (RabbitMQ brokers, when metrics are enabled)
and acts only on `after_process_boot`, which the `dramatiq` CLI emits in each worker process
(never the clock, a command or an in-process test worker). Then it clears the group's
multiprocess directory if an earlier group left it, adds dramatiq's own Prometheus middleware
(actor metrics) writing to the same directory, and turns crawlsched's metrics on.

dramatiq's middleware would fork its own exposition server on `dramatiq_prom_host:port`
(environment variables read at import); instead `WorkerMetrics.forks` names `serve`, one
exporter per group on `CRAWLSCHED_METRICS_ADDRESS` serving both families, summed over the
group's processes.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import ModuleType

import dramatiq

from crawlsched import metrics
from crawlsched.logs import configure_logging, get_logger
from crawlsched.metrics import multiproc
from crawlsched.settings import Settings, split_address

log = get_logger(__name__)


class WorkerMetrics(dramatiq.Middleware):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @property
    def forks(self) -> list:
        return [serve]

    def after_process_boot(self, broker: dramatiq.Broker) -> None:
        directory = self.settings.metrics_dir
        cleared = multiproc.prepare(directory, multiproc.group_of_this_process())
        multiproc.use(directory)
        # dramatiq reads its directory from an environment variable at import; this group's
        # directory is a setting, so hand it over where the middleware looks for it.
        dramatiq_prometheus = _dramatiq_prometheus(directory)
        dramatiq_prometheus.DB_PATH = str(directory)
        actor_metrics = _actor_metrics(dramatiq_prometheus)
        actor_metrics.after_process_boot(broker)
        broker.add_middleware(actor_metrics)
        metrics.enable()
        log.info("metrics_enabled", directory=str(directory), cleared_earlier_group=cleared)


def _dramatiq_prometheus(directory: Path) -> ModuleType:
    """dramatiq's Prometheus module, imported only where it is used. On import it makes its
    directory, `$TMPDIR/dramatiq-prometheus` unless `dramatiq_prom_db` names another: every
    process that imported crawlsched's brokers left that folder behind. Name this group's."""
    os.environ.setdefault("dramatiq_prom_db", str(directory))
    from dramatiq.middleware import prometheus

    return prometheus


def _actor_metrics(dramatiq_prometheus: ModuleType) -> dramatiq.Middleware:
    class ActorMetrics(dramatiq_prometheus.Prometheus):
        """dramatiq's actor metrics without their own exposition server (`serve` has them)."""

        @property
        def forks(self) -> list:
            return []

    return ActorMetrics()


def serve() -> int:
    """The group's exporter (a process the `dramatiq` CLI forks): every process's counts."""
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    settings = Settings()
    configure_logging(settings.log_format, settings.log_level)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(settings.metrics_dir))
    host, port = split_address(settings.metrics_address, "metrics_address")
    try:
        start_http_server(port, addr=host, registry=registry)
    except OSError as e:
        # The workers go on without an exporter; Prometheus's `up` shows the group missing.
        log.error("metrics_exporter_failed", address=settings.metrics_address, error=str(e))
        return 1
    log.info("metrics_exporter_started", address=settings.metrics_address)
    threading.Event().wait()  # the HTTP server runs in a thread; SIGTERM ends this process
    return 0
