"""The clock's loop: a tick every period, and a few lines that say it is alive.

No line per tick: a heartbeat at most every `heartbeat_s` (ticks sent, last tick time), and a
line for each reconnect to the broker with its reason: one dramatiq made by itself inside a
send (a stale connection replaced), or ours after a send failed (the broker away: retried with
backoff until it is back, or until the clock is stopped).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pika.exceptions
from dramatiq.errors import BrokerConnectionError
from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_exponential

from crawlsched.logs import get_logger
from crawlsched.services import error_reason

log = get_logger(__name__)

BROKER_ERRORS = (BrokerConnectionError, pika.exceptions.AMQPError, OSError)


class Heartbeat:
    """When the clock says it is alive: pure bookkeeping, `now` (monotonic seconds) given."""

    def __init__(self, every_s: float, started: float) -> None:
        if every_s <= 0:
            raise ValueError(f"heartbeat_s: must be positive, got {every_s}")
        self.every_s = every_s
        self.next_at = started + every_s
        self.sent = 0

    def tick_sent(self, now: float) -> bool:
        """Count a tick; True when a heartbeat line is due."""
        self.sent += 1
        if now < self.next_at:
            return False
        self.next_at = now + self.every_s
        return True


def run_clock(
    send: Callable[[], Any],
    *,
    period_s: float,
    stop: threading.Event,
    count: int = 0,
    heartbeat_s: float = 60.0,
    broker: Any = None,
    on_sent: Callable[[], None] | None = None,
    first_backoff_s: float = 1.0,
    max_backoff_s: float = 60.0,
    monotonic: Callable[[], float] = time.monotonic,
) -> int:
    """Send a tick every `period_s` until `stop` is set (or `count` ticks); the ticks sent.

    `broker`, when it counts the connections it dropped (`connection_drops`,
    `last_drop_reason`: CrawlschedRabbitmqBroker), lets the clock name dramatiq's own reconnects.
    """
    heartbeat = Heartbeat(heartbeat_s, monotonic())
    drops = getattr(broker, "connection_drops", 0)
    last_tick_at: str | None = None
    last_failure = ["send failed"]

    def reconnecting(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        last_failure[0] = error_reason(error) if error else "unknown"
        log.warning(
            "clock_broker_reconnecting",
            reason=last_failure[0],
            attempt=state.attempt_number,
            retry_in_s=round(state.upcoming_sleep, 1),
        )

    retrying = Retrying(
        retry=retry_if_exception_type(BROKER_ERRORS),
        wait=wait_exponential(multiplier=first_backoff_s, max=max_backoff_s),
        stop=lambda _state: stop.is_set(),
        sleep=stop.wait,
        before_sleep=reconnecting,
        reraise=True,
    )

    def sent_once() -> int:
        """Send one tick, retrying while the broker is away; the attempts it took (0: stopped)."""
        for attempt in retrying:
            if stop.is_set():
                return 0
            with attempt:
                send()
        return retrying.statistics.get("attempt_number", 1)

    while not stop.is_set():
        try:
            attempts = sent_once()
        except BROKER_ERRORS:
            attempts = 0  # stopped while the broker was away
        if not attempts:
            break
        now_drops = getattr(broker, "connection_drops", 0)
        if attempts > 1 or now_drops > drops:
            log.info(
                "clock_broker_reconnected",
                reason=getattr(broker, "last_drop_reason", None) or last_failure[0],
                attempts=attempts,
                connections_dropped=now_drops - drops,
            )
            drops = now_drops
        last_tick_at = datetime.now(UTC).isoformat(timespec="seconds")
        if on_sent:
            on_sent()
        if heartbeat.tick_sent(monotonic()):
            log.info("clock_alive", ticks_sent=heartbeat.sent, last_tick_at=last_tick_at)
        if count and heartbeat.sent >= count:
            break
        stop.wait(period_s)
    log.info("clock_stopped", ticks=heartbeat.sent, last_tick_at=last_tick_at)
    return heartbeat.sent
