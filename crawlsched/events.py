"""Events: stored in the `activity` collection (the outbox), then published on the
`crawlsched.events` topic exchange for other services, at least once.

Each event document carries a stable `event_id` (a run's end: `<run id>:<event>`, so the same
end written twice is one document) and, on a RabbitMQ deployment, `outbox: "pending"` until
RabbitMQ confirmed it (publisher confirms). It is published at once when it is written; one
that could not be (a broker node gone, a connection reset while idle) stays pending and the
relay (`relay_events`, run by every tick) publishes it later with backoff. A consumer drops
duplicates by `event_id`. The publishing connection is reopened before use when it has been
idle long enough for RabbitMQ to have dropped it, and once more when a publish fails on it.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from datetime import datetime, timedelta
from typing import Any, Protocol

from crawlsched.logs import get_logger
from crawlsched.planning.retention import EXPIRE_AT, Retention

log = get_logger(__name__)

EXCHANGE = "crawlsched.events"
# Short: a broker that does not answer must not hold an actor for long.
CONNECT_TIMEOUT_S = 3.0
# A BlockingConnection answers heartbeats only while it is used: after this long idle it may
# have been closed by the broker, so it is reopened before the next publish.
IDLE_REOPEN_S = 20.0
PENDING, SENT = "pending", "sent"
RELAY_BATCH = 200
# How long an event being published belongs to its publisher: the relay takes it up only after
# this, so an event published inline (or by another relay) is not sent twice. Longer than a
# publish can take (connect timeout, one retry, the confirm).
PUBLISH_CLAIM_S = 30.0
RELAY_BACKOFF_MAX_S = 300.0
_WORD = re.compile(r"[A-Z][a-z0-9]*")


class Runtime(Protocol):
    """What events need of the process's runtime (`crawlsched.runtime.Runtime`, which builds
    on this module: it emits `HostBlocked`)."""

    settings: Any
    db: Any
    retention: Retention
    event_publisher: Any  # RabbitmqEventPublisher, or None on the in-process stub broker

    def now(self) -> datetime: ...


def routing_key(name: str) -> str:
    """`RunFinished` → `run.finished`, `ScheduleUnpaused` → `schedule.unpaused`,
    `LeaseGrantFailed` → `lease.grant_failed`: subject, then what happened to it."""
    words = _WORD.findall(name)
    if not words or "".join(words) != name:
        raise ValueError(f"event names are CamelCase words, got {name!r}")
    subject, *rest = (w.lower() for w in words)
    return f"{subject}.{'_'.join(rest) or 'happened'}"


def connection_name() -> str:
    return f"crawlsched events publisher (pid {os.getpid()})"


class RabbitmqEventPublisher:
    """One pika connection per process (reopened after a failure), used under a lock: a pika
    BlockingConnection is not thread-safe and dramatiq runs actors in threads."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.Lock()
        self._channel: Any = None
        self._connection: Any = None
        self._used_at = 0.0

    def _open(self) -> Any:
        import pika

        from crawlsched.settings import split_broker_urls

        nodes = [pika.URLParameters(url) for url in split_broker_urls(self.url)]
        for params in nodes:
            # Named, so the management UI (and `rabbitmqctl list_connections`) says whose it is.
            params.client_properties = {"connection_name": connection_name()}
            params.socket_timeout = CONNECT_TIMEOUT_S
            params.blocked_connection_timeout = CONNECT_TIMEOUT_S
            params.connection_attempts = 1
        self._connection = pika.BlockingConnection(nodes)
        channel = self._connection.channel()
        channel.exchange_declare(exchange=EXCHANGE, exchange_type="topic", durable=True)
        # Every publish waits for RabbitMQ's confirm: a nack or a lost connection raises.
        channel.confirm_delivery()
        self._channel = channel
        return channel

    def publish(self, key: str, body: bytes, message_id: str | None = None) -> None:
        """Publish and wait for RabbitMQ's confirm; raises if it never came."""
        import pika

        properties = pika.BasicProperties(
            content_type="application/json", delivery_mode=2, message_id=message_id
        )
        with self._lock:
            for last_try in (False, True):
                try:
                    self._channel_for_use().basic_publish(EXCHANGE, key, body, properties)
                    self._used_at = time.monotonic()
                    return
                except Exception as e:
                    # A connection that died unseen (a node killed, a reset): one fresh try.
                    self.close_quietly()
                    if last_try:
                        raise
                    log.info("event_connection_reopened", reason=f"publish failed: {e!r}"[:200])

    def _channel_for_use(self) -> Any:
        idle = time.monotonic() - self._used_at
        if self._channel is not None and (not self._channel.is_open or idle > IDLE_REOPEN_S):
            reason = f"idle {idle:.0f} s" if idle > IDLE_REOPEN_S else "closed"
            log.info("event_connection_reopened", reason=reason)
            self.close_quietly()
        return self._channel if self._channel is not None else self._open()

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


def emit(rt: Runtime, name: str, event_id: str | None = None, **fields: Any) -> str:
    """Store the event `name` (past tense, e.g. "RunFinished") in `activity`, then publish it.

    With an `event_id`, writing the same event twice stores and publishes it once. Returns
    the event's id."""
    routing_key(name)  # refuses a malformed name before anything is stored
    now = rt.now()
    event_id = event_id or uuid.uuid4().hex
    doc: dict[str, Any] = {"event": name, "event_id": event_id, "at": now, **fields}
    publisher = rt.event_publisher
    if publisher is None:
        # Nothing to publish: the event is complete as stored, and kept for its retention.
        doc[EXPIRE_AT] = rt.retention.activity_until(now)
    else:
        # Claimed by this call until PUBLISH_CLAIM_S: the relay then takes it up only if this
        # publish never marked it sent (the process died, the broker was away).
        claim_until = now + timedelta(seconds=PUBLISH_CLAIM_S)
        doc.update(outbox=PENDING, publish_after=claim_until, publish_tries=0)
    written = rt.db.activity.update_one({"event_id": event_id}, {"$setOnInsert": doc}, upsert=True)
    if publisher is not None and written.upserted_id is not None:
        _publish(rt, publisher, {**doc, "_id": written.upserted_id})
    return event_id


def relay_events(rt: Runtime) -> int:
    """Publish the events still pending whose backoff has passed, oldest first; stops at the
    first failure (the broker is likely still away). Returns how many went out."""
    publisher = rt.event_publisher
    if publisher is None:
        return 0
    now = rt.now()
    query = {"outbox": PENDING, "publish_after": {"$lte": now}}
    cursor = rt.db.activity.find(query).sort([("at", 1), ("_id", 1)]).limit(RELAY_BATCH)
    sent = 0
    for doc in list(cursor):
        # Claim it first (compare-and-set on its due time), so two tickers relaying at once,
        # or a relay racing a slow inline publish, send it once.
        claimed = rt.db.activity.update_one(
            {"_id": doc["_id"], "outbox": PENDING, "publish_after": doc["publish_after"]},
            {"$set": {"publish_after": now + timedelta(seconds=PUBLISH_CLAIM_S)}},
        )
        if claimed.modified_count == 0:
            continue
        if not _publish(rt, publisher, doc):
            break
        sent += 1
    if sent:
        log.info("events_relayed", events=sent)
    return sent


def _publish(rt: Runtime, publisher: RabbitmqEventPublisher, doc: dict[str, Any]) -> bool:
    private = ("_id", "outbox", "publish_after", "publish_tries", "published_at", "last_error")
    body = {k: v for k, v in doc.items() if k not in private}
    body.update(_id=doc["event_id"], routing_key=routing_key(doc["event"]))
    try:
        publisher.publish(
            body["routing_key"],
            json.dumps(body, default=_json_default).encode(),
            message_id=doc["event_id"],
        )
    except Exception as e:
        tries = int(doc.get("publish_tries") or 0) + 1
        delay = min(RELAY_BACKOFF_MAX_S, 2.0 ** min(tries, 16))
        error = f"{type(e).__name__}: {e}"[:300]
        rt.db.activity.update_one(
            {"_id": doc["_id"], "outbox": PENDING},
            {
                "$set": {"publish_after": rt.now() + timedelta(seconds=delay), "last_error": error},
                "$inc": {"publish_tries": 1},
            },
        )
        log.warning(
            "event_publish_deferred", event_name=doc["event"], retry_in_s=delay, error=error
        )
        return False
    now = rt.now()
    # Kept for its retention from now on; never while it is still owed to the exchange.
    rt.db.activity.update_one(
        {"_id": doc["_id"]},
        {
            "$set": {
                "outbox": SENT,
                "published_at": now,
                EXPIRE_AT: rt.retention.activity_until(now),
            }
        },
    )
    return True


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)
