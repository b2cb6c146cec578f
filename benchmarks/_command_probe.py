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
