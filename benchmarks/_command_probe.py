"""Counts the MongoDB commands of a crawlsched process for bench_frontier.py (not a benchmark).

Loaded into every worker (and `crawlsched run now`) through
`CRAWLSCHED_DRIVER_MODULES='["_command_probe"]'` with benchmarks/ on PYTHONPATH; its DRIVERS
table is empty. On import it registers the store's own `CommandCounter` listener with pymongo's
command monitoring for the whole process (every client made afterwards reports to it: the
runtime opens its client lazily, after the plugins are loaded), and a daemon thread writes the
tally to `$BENCH_COMMANDS_DIR/<pid>.json` every 0.25 s and at exit. Counted as the store counts
them on the wire: one per command started, driver housekeeping and `getMore` left out.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
from collections import Counter
from pathlib import Path

from pymongo import monitoring

from crawlsched.store.counting import CommandCounter

DRIVERS: dict = {}
PERIOD_S = 0.25

counter = CommandCounter()
by_target: Counter[str] = Counter()  # "<command> <collection>", for the breakdown
_lock = threading.Lock()


class _Listener(monitoring.CommandListener):
    def started(self, event: monitoring.CommandStartedEvent) -> None:
        counter.listener.started(event)
        name = event.command_name
        if name != "getMore" and name in counter.wire:  # counted (not housekeeping)
            with _lock:
                by_target[f"{name} {event.command.get(name)}"] += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


monitoring.register(_Listener())
_out = Path(os.environ["BENCH_COMMANDS_DIR"]) / f"{os.getpid()}.json"


def _write() -> None:
    with _lock:
        targets = dict(by_target)
    tally = {"wire": dict(counter.wire), "targets": targets}
    _out.with_suffix(".tmp").write_text(json.dumps(tally))
    _out.with_suffix(".tmp").replace(_out)  # whole files only: the benchmark reads them live


def _loop() -> None:
    while True:
        time.sleep(PERIOD_S)
        _write()


threading.Thread(target=_loop, name="bench-command-probe", daemon=True).start()
atexit.register(_write)


# -- when each request was planned and sent (BENCH_SEND_LOG): what the pacer decided vs the wire


def _log_sends(folder: str) -> None:
    import httpx

    from crawlsched.drivers.fetching import PoliteHttp
    from crawlsched.flow.host_pacing import ClusterHostPacer

    local = threading.local()
    log = (Path(folder) / f"{os.getpid()}.sends").open("a", buffering=1)
    reserve, read, send = ClusterHostPacer._reserve, PoliteHttp._read, httpx.Client.send

    def timed_reserve(self, key, host, policy):
        start = reserve(self, key, host, policy)
        local.planned, local.reserved = start.timestamp(), time.time()
        return start

    def timed_read(self, method, url, *rest):
        local.url, local.planned, local.reserved = url, None, None
        return read(self, method, url, *rest)

    def timed_send(self, request, **kw):
        if getattr(local, "url", None) == str(request.url):
            log.write(json.dumps([local.url, local.planned, time.time(), local.reserved]) + "\n")
        return send(self, request, **kw)

    ClusterHostPacer._reserve = timed_reserve
    PoliteHttp._read = timed_read
    httpx.Client.send = timed_send


if os.environ.get("BENCH_SEND_LOG"):
    _log_sends(os.environ["BENCH_SEND_LOG"])
