"""Events: stored in the `activity` collection, then published on the `crawlsched.events`
topic exchange for other services.

Store first, publish best-effort: the activity collection is the record (it is what
`crawlsched activity` reads, and a consumer that must not miss anything reads it by time);
the exchange is a live feed. A publish that fails (RabbitMQ restarting, a connection gone)
is logged as a warning and dropped; it never fails or holds up the actor that emitted the
event. The connection is opened with short timeouts and reopened on the next event.
"""

from __future__ import annotations

import json
import os
import re
import threading
from datetime import datetime
from typing import TYPE_CHECKING, Any

from crawlsched.logs import get_logger

if TYPE_CHECKING:
    from crawlsched.runtime import Runtime

log = get_logger(__name__)

EXCHANGE = "crawlsched.events"
# Short: a broker that does not answer must not hold an actor for long.
CONNECT_TIMEOUT_S = 3.0
_WORD = re.compile(r"[A-Z][a-z0-9]*")


def routing_key(name: str) -> str:
    """`RunFinished` → `run.finished`, `ScheduleUnpaused` → `schedule.unpaused`,
    `LeaseGrantFailed` → `lease.grant_failed`: subject, then what happened to it."""
    words = _WORD.findall(name)
    if not words or "".join(words) != name:
        raise ValueError(f"event names are CamelCase words, got {name!r}")
    subject, *rest = (w.lower() for w in words)
    return f"{subject}.{'_'.join(rest) or 'happened'}"


class RabbitmqEventPublisher:
    """One pika connection per process (reopened after a failure), used under a lock: a pika
    BlockingConnection is not thread-safe and dramatiq runs actors in threads."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.Lock()
        self._channel: Any = None
        self._connection: Any = None

    def _open(self) -> Any:
        import pika

        from crawlsched.settings import split_broker_urls

        nodes = [pika.URLParameters(url) for url in split_broker_urls(self.url)]
        for params in nodes:
            params.socket_timeout = CONNECT_TIMEOUT_S
            params.blocked_connection_timeout = CONNECT_TIMEOUT_S
            params.connection_attempts = 1
        self._connection = pika.BlockingConnection(nodes)
        channel = self._connection.channel()
        channel.exchange_declare(exchange=EXCHANGE, exchange_type="topic", durable=True)
        self._channel = channel
        return channel

    def publish(self, key: str, body: bytes) -> None:
        import pika

        with self._lock:
            try:
                channel = self._channel if self._channel and self._channel.is_open else self._open()
                channel.basic_publish(
                    EXCHANGE,
                    key,
                    body,
                    pika.BasicProperties(content_type="application/json", delivery_mode=2),
                )
            except Exception:
                self.close_quietly()
                raise

    def close_quietly(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        try:
            if connection is not None and connection.is_open:
                connection.close()
        except Exception:  # closing a broken connection: nothing left to save
            pass


_publishers: dict[tuple[int, str], RabbitmqEventPublisher] = {}
_publishers_lock = threading.Lock()


def publisher_for(url: str) -> RabbitmqEventPublisher | None:
    """The publisher of this process for `url`; None for the in-process stub broker.

    Keyed by pid as well: a connection must not cross the dramatiq CLI's fork.
    """
    if url.startswith("stub://"):
        return None
    key = (os.getpid(), url)
    with _publishers_lock:
        if key not in _publishers:
            _publishers[key] = RabbitmqEventPublisher(url)
        return _publishers[key]


def emit(rt: Runtime, name: str, **fields: Any) -> None:
    """Store the event `name` (past tense, e.g. "RunFinished") in `activity`, then publish it."""
    key = routing_key(name)
    doc: dict[str, Any] = {"event": name, "at": rt.now(), **fields}
    rt.db.activity.insert_one(doc)
    publisher = publisher_for(rt.settings.broker_url)
    if publisher is None:
        return
    body = {**doc, "_id": str(doc["_id"]), "routing_key": key}
    try:
        publisher.publish(key, json.dumps(body, default=_json_default).encode())
    except Exception as e:  # best-effort: the stored event is the record
        log.warning("event_publish_failed", event_name=name, error=f"{type(e).__name__}: {e}"[:300])


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)
