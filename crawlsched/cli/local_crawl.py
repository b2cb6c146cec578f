"""`crawlsched crawl` with no server: the whole system in this process on embedded defaults
(an embedded store of its own, in-process workers, a clock), as `crawlsched demo` runs, keeping
nothing when it ends. The crawl then goes through a `LocalBackend` over that runtime, exactly as
it would through a server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import SecretStr

from crawlsched.settings import Settings

STORE = "mongomock://crawl"


@contextmanager
def embedded_system(settings: Settings, threads: int, delay_s: float | None) -> Iterator[Any]:
    """A `LocalBackend` over an in-process system, stopped and forgotten when the block ends."""
    from dramatiq import Worker

    from crawlsched.brokers import setup_broker
    from crawlsched.cli.local import LocalBackend
    from crawlsched.reference import load_reference
    from crawlsched.resources.secrets import generate_key
    from crawlsched.runtime import get_runtime
    from crawlsched.store.client import drop_embedded

    update: dict[str, Any] = {"mongo_url": STORE, "broker_url": "stub://"}
    if settings.secret_key is None:
        update["secret_key"] = SecretStr(generate_key())  # what it encrypts dies with it
    if "log_level" not in settings.model_fields_set:
        update["log_level"] = "ERROR"  # the progress bar and summary say what happens
    if delay_s is not None:
        update["host_delay_s"] = delay_s
    own = settings.model_copy(update=update)
    drop_embedded(STORE)
    broker = setup_broker(own)
    from crawlsched.actors import ticker

    rt = get_runtime()
    rt.create_indexes()
    rt.reference.load(load_reference(own.reference_file))
    worker = Worker(broker, worker_threads=threads)
    worker.start()
    stop = threading.Event()
    clock = threading.Thread(target=_tick, args=(ticker.tick.send, own, stop), daemon=True)
    clock.start()
    try:
        yield LocalBackend(own, "crawlsched crawl", runtime=rt, delivers=True)
    finally:
        stop.set()
        clock.join(timeout=10)
        worker.stop()
        drop_embedded(STORE)


def _tick(send: Any, settings: Settings, stop: threading.Event) -> None:
    """The clock: reclaims, admission passes and wake-ups a crawl's batches may wait for."""
    while not stop.wait(settings.clock_interval_s):
        send()
