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
from pathlib import Path

from pymongo import monitoring

from crawlsched.store.counting import CommandCounter

DRIVERS: dict = {}
PERIOD_S = 0.25

counter = CommandCounter()
monitoring.register(counter.listener)
_out = Path(os.environ["BENCH_COMMANDS_DIR"]) / f"{os.getpid()}.json"


def _write() -> None:
    tally = {"wire": dict(counter.wire), "getmore": counter.wire_cursor_continuations}
    _out.with_suffix(".tmp").write_text(json.dumps(tally))
    _out.with_suffix(".tmp").replace(_out)  # whole files only: the benchmark reads them live


def _loop() -> None:
    while True:
        time.sleep(PERIOD_S)
        _write()


threading.Thread(target=_loop, name="bench-command-probe", daemon=True).start()
atexit.register(_write)
