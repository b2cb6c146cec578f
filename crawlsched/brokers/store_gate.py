"""WaitForMongo: a worker whose MongoDB is gone stops taking messages until it is back.

Without it every message fails on its own (30 s of server selection each, then a retry), and
the log fills with tracebacks. With it, the first message that loses the store marks it down
(that message is retried later by dramatiq's Retries); every worker thread then waits here,
before its next message, while one of them pings the store with capped backoff, logging once
per step. Messages already fetched stay unacknowledged, so nothing is lost meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pymongo.errors
from dramatiq import Middleware

from crawlsched.logs import get_logger

log = get_logger("crawlsched.store_gate")


class WaitForMongo(Middleware):
    def __init__(
        self,
        ping: Callable[[], None],
        first_step_s: float = 1.0,
        max_step_s: float = 30.0,
        sleep: Callable[[float], bool] | None = None,
    ) -> None:
        self.ping = ping
        self.first_step_s = first_step_s
        self.max_step_s = max_step_s
        self.down = False
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._sleep = sleep or self._stopping.wait
        self.waits = 0  # backoff steps taken (for tests and the outage figure)

    def after_process_message(self, broker, message, *, result=None, exception=None) -> None:
        if isinstance(exception, pymongo.errors.ConnectionFailure):
            if not self.down:
                log.warning("mongodb_lost_pausing_worker", error=type(exception).__name__)
            self.down = True

    def before_worker_shutdown(self, broker, worker) -> None:
        self._stopping.set()

    def before_process_message(self, broker, message) -> None:
        if not self.down:
            return
        with self._lock:  # one thread probes; the others wait for its answer
            step = self.first_step_s
            while self.down and not self._stopping.is_set():
                try:
                    self.ping()
                except pymongo.errors.PyMongoError as e:
                    self.waits += 1
                    log.warning(
                        "mongodb_unreachable_waiting", error=type(e).__name__, retry_in_s=step
                    )
                    self._sleep(step)
                    step = min(step * 2, self.max_step_s)
                    continue
                self.down = False
                log.warning("mongodb_back_resuming_worker")
