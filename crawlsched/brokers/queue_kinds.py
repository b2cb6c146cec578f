"""The arguments crawlsched declares its RabbitMQ queues with, classic or quorum.

Each actor queue comes with two more (dramatiq's layout): `<q>.DQ`, where delayed messages
(retries with backoff) wait, held by a worker until their time; and `<q>.XQ`, where dead
letters go. On quorum queues:

- the main queue gets a delivery limit: a message handed out that many times without an ack
  (its worker died each time) is dead-lettered to `.XQ` instead of killing workers forever;
- the delay queue gets none: a worker holds a delayed message unacked until its time, so every
  worker restart hands it out again, and a limit would dead-letter a healthy retry. RabbitMQ 4
  sets a default limit (20) on every quorum queue, so there it is switched off with -1; 3.x
  has no default and refuses -1, so the argument is left out;
- priorities are not declared (quorum queues of 3.x have none; 4.x has two levels without any
  argument); crawlsched sends none.

Pure: no pika, no dramatiq.
"""

from __future__ import annotations

from typing import Any, Literal

QueueType = Literal["classic", "quorum"]
QueueRole = Literal["main", "delay", "dead"]


def queue_arguments(
    role: QueueRole,
    queue_type: QueueType,
    *,
    dead_letter_queue: str,
    dead_message_ttl_ms: int,
    delivery_limit: int,
    server_major: int,
) -> dict[str, Any]:
    """The `arguments` of queue.declare for one queue of an actor."""
    if queue_type not in ("classic", "quorum"):
        raise ValueError(f"queue_type must be classic or quorum, got {queue_type!r}")
    if delivery_limit < 1:
        raise ValueError(f"delivery_limit must be >= 1, got {delivery_limit}")
    arguments: dict[str, Any] = {}
    if queue_type == "quorum":
        arguments["x-queue-type"] = "quorum"
    if role == "dead":
        # Expired head-first, so one static TTL for all (as dramatiq declares it).
        arguments["x-message-ttl"] = dead_message_ttl_ms
        return arguments
    if role not in ("main", "delay"):
        raise ValueError(f"unknown queue role {role!r}")
    arguments["x-dead-letter-exchange"] = ""
    arguments["x-dead-letter-routing-key"] = dead_letter_queue
    if queue_type == "quorum":
        if role == "main":
            arguments["x-delivery-limit"] = delivery_limit
        elif server_major >= 4:
            arguments["x-delivery-limit"] = -1
    return arguments


def server_major_version(server_properties: dict[str, Any]) -> int:
    """The major version RabbitMQ announces on connect (`version`: b"3.10.8"); 3 if unknown."""
    version = server_properties.get("version", b"")
    if isinstance(version, bytes):
        version = version.decode("ascii", "replace")
    head = str(version).split(".", 1)[0]
    return int(head) if head.isdigit() else 3
