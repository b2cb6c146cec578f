"""A no-op actor for the `dramatiq` CLI (bench_pipeline.py's out-of-process baseline, a').

    BENCH_QUEUE=bench.noop.123 BENCH_MARK_FILE=/tmp/x BENCH_AMQP_URL=amqp://… \
        .venv/bin/dramatiq _noop_cli_actor --path benchmarks --processes 1 --threads 8

Each processed message appends one byte to BENCH_MARK_FILE (O_APPEND: safe across threads and
processes); the benchmark polls the file's size. Same middleware stack as crawlsched's broker.
"""

from __future__ import annotations

import os

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker

from crawlsched.brokers import middleware
from crawlsched.settings import Settings

_settings = Settings(
    broker_url=os.environ["BENCH_AMQP_URL"], log_level="WARNING", message_signing=False
)
broker = RabbitmqBroker(url=_settings.broker_url, middleware=middleware(_settings))
dramatiq.set_broker(broker)

_MARK = os.environ["BENCH_MARK_FILE"]
_fd = os.open(_MARK, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


@dramatiq.actor(actor_name="bench_noop_cli", queue_name=os.environ["BENCH_QUEUE"], max_retries=0)
def bench_noop_cli() -> None:
    os.write(_fd, b".")
