"""What a `dramatiq` worker process does when it is told to stop (SIGTERM: `kubectl rollout`,
a node drain, a KEDA scale-down, `docker compose stop`), and its heartbeat while it runs.

dramatiq's own stop (`Worker.stop`) lets each worker thread finish the message it holds, for
up to `--worker-shutdown-timeout` (10 minutes), then requeues what was prefetched. A crawl
batch can take longer than the grace period a platform gives before SIGKILL, and a batch
killed then is only recovered when its dispatch lease expires. So, first (`before_worker_
shutdown`):

1. the process's environment is marked draining: every batch starts no page, lets the pages
   in flight finish, records them and gives the rest back to wait, under a dispatch of its
   own, for another worker (`crawl/loop.py`); its leases go back as they always do;
2. the worker threads are told to take no further message, and are waited for, up to
   `CRAWLSCHED_DRAIN_S`;
3. a worker still busy then is logged (`drain_over_limit`) and the process exits 1 at once:
   its batches are redelivered by RabbitMQ and recovered, as after a crash.

Only in processes the `dramatiq` CLI boots (`after_process_boot`), never in a test's or the
standalone server's in-process worker.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import dramatiq

from crawlsched import runtime
from crawlsched.liveness import HeartbeatFile
from crawlsched.logs import get_logger

log = get_logger(__name__)

EXIT_DRAIN_OVER_LIMIT = 1


class Drain(dramatiq.Middleware):
    def __init__(
        self,
        drain_s: float,
        heartbeat_file: Path | None,
        heartbeat_s: float,
        exit_now: Callable[[int], None] = os._exit,
    ) -> None:
        self.drain_s = drain_s
        self.heartbeat_file, self.heartbeat_s = heartbeat_file, heartbeat_s
        self.exit_now = exit_now
        self.booted = False
        self.stopping = threading.Event()

    def after_process_boot(self, broker: dramatiq.Broker) -> None:
        self.booted = True

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        if self.booted and self.heartbeat_file is not None:
            heartbeat = HeartbeatFile(self.heartbeat_file)
            beating = threading.Thread(
                target=self._beat, args=(heartbeat, worker), name="heartbeat", daemon=True
            )
            beating.start()

    def _beat(self, heartbeat: HeartbeatFile, worker: dramatiq.Worker) -> None:
        """Beat while every consumer and worker thread lives: a process whose consumer died
        (its connection gone for good) stops beating, and its liveness probe restarts it. A
        draining process beats on, as not taking work, until its threads are done."""
        while all(t.is_alive() for t in (*worker.consumers.values(), *worker.workers)):
            stopping = self.stopping.is_set()
            heartbeat.beat(taking_work=not stopping)
            if stopping:
                time.sleep(self.heartbeat_s)
            else:
                self.stopping.wait(self.heartbeat_s)
        if not self.stopping.is_set():
            log.error("heartbeat_stopped", reason="a consumer or worker thread died")

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        if not self.booted:
            return
        self.stopping.set()
        began = time.monotonic()
        runtime.get_runtime().env.drain()
        log.info("drain_started", drain_s=self.drain_s, threads=len(worker.workers))
        for thread in worker.workers:
            thread.stop()  # no further message; the one it holds is finished
        deadline = began + self.drain_s
        for thread in worker.workers:
            thread.join(max(0.0, deadline - time.monotonic()))
        busy = sum(thread.is_alive() for thread in worker.workers)
        took_s = round(time.monotonic() - began, 3)
        if busy:
            log.error("drain_over_limit", drain_s=self.drain_s, took_s=took_s, busy_threads=busy)
            self.exit_now(EXIT_DRAIN_OVER_LIMIT)
            return
        log.info("drain_finished", took_s=took_s)
