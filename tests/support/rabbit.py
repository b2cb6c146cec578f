"""A RabbitMQ virtual host of our own per test session, so tests never touch other queues."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import uuid
from urllib.parse import unquote, urlparse

import pika

HOST, PORT = "127.0.0.1", 5672


def listening(host: str = HOST, port: int = PORT) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def _ctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


class TestVhost:
    """Create `crawlsched-test-<random>` with guest's permissions; delete it (and its queues)."""

    def __init__(self) -> None:
        self.name = f"crawlsched-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@{HOST}:{PORT}/{self.name}"

    def create(self) -> TestVhost:
        if not listening():
            raise RuntimeError(f"RabbitMQ is not listening on {HOST}:{PORT}")
        if shutil.which("rabbitmqctl") is None:
            raise RuntimeError("rabbitmqctl is not installed: cannot create a test vhost")
        _ctl("add_vhost", self.name)
        _ctl("set_permissions", "-p", self.name, "guest", ".*", ".*", ".*")
        return self

    def delete(self) -> None:
        # Best effort: a vhost left behind holds only this session's test queues.
        subprocess.run(
            ["rabbitmqctl", "-q", "delete_vhost", self.name],
            check=False,
            capture_output=True,
            timeout=60,
        )


def queue_depth(url: str, queue: str) -> int:
    """Messages waiting in `queue` (0 if it does not exist)."""
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        try:
            return channel.queue_declare(queue=queue, passive=True).method.message_count
        except pika.exceptions.ChannelClosedByBroker:
            return 0
    finally:
        if connection.is_open:
            connection.close()


def publish_raw(url: str, queue: str, body: bytes) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        connection.channel().basic_publish(exchange="", routing_key=queue, body=body)
    finally:
        connection.close()


def queue_holding(url: str, queue: str) -> int:
    """Messages `queue` still holds, ready or delivered but not yet acked (0 if it does not
    exist). `queue_depth` counts ready ones only: a message a worker prefetched or is still
    processing is invisible to it."""
    vhost = unquote(urlparse(url).path.lstrip("/")) or "/"
    out = subprocess.run(
        ["rabbitmqctl", "-q", "list_queues", "-p", vhost, "name", "messages", "--no-table-headers"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    for line in out.splitlines():
        name, _, count = line.partition("\t")
        if name == queue and count.strip().isdigit():
            return int(count)
    return 0


def crawl_queue_consumers(url: str) -> dict[str, int]:
    """Per crawl queue of the URL's vhost (`crawlsched.crawl.*`), how many channels consume it:
    one per worker process (dramatiq's consumer of a queue has a connection and channel of its
    own in each process)."""
    vhost = unquote(urlparse(url).path.lstrip("/")) or "/"
    out = subprocess.run(
        [
            "rabbitmqctl", "-q", "list_consumers", "-p", vhost,
            "queue_name", "channel_pid", "--no-table-headers",
        ],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout  # fmt: skip
    channels: dict[str, set[str]] = {}
    for line in out.splitlines():
        queue, _, channel = line.partition("\t")
        if queue.startswith("crawlsched.crawl.") and not queue.endswith((".DQ", ".XQ")):
            channels.setdefault(queue, set()).add(channel.strip())
    return {queue: len(found) for queue, found in channels.items()}
