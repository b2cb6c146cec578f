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
import sys
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
# With BENCH_CALL_SITES set: the same, with the crawlsched function that asked and its caller.
by_site: Counter[str] = Counter()
_SITES = bool(os.environ.get("BENCH_CALL_SITES"))
# How many crawlsched frames name a call site (BENCH_CALL_SITE_DEPTH; 3 unless set).
_DEPTH = int(os.environ.get("BENCH_CALL_SITE_DEPTH") or 3)


def _call_site() -> str:
    """The innermost crawlsched frames outside the store's plumbing (client, counting)."""
    names = []
    frame = sys._getframe(2)
    while frame is not None and len(names) < _DEPTH:
        path = frame.f_code.co_filename
        if "/crawlsched/" in path and not path.endswith(("client.py", "counting.py")):
            module = path.rsplit("/crawlsched/", 1)[1].removesuffix(".py")
            names.append(f"{module}.{frame.f_code.co_name}")
        frame = frame.f_back
    return " < ".join(names)


_lock = threading.Lock()


class _Listener(monitoring.CommandListener):
    def started(self, event: monitoring.CommandStartedEvent) -> None:
        counter.listener.started(event)
        name = event.command_name
        if name != "getMore" and name in counter.wire:  # counted (not housekeeping)
            with _lock:
                by_target[f"{name} {event.command.get(name)}"] += 1
            if _SITES:
                site = f"{name} {event.command.get(name)}: {_call_site()}"
                with _lock:
                    by_site[site] += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


monitoring.register(_Listener())
_out = Path(os.environ["BENCH_COMMANDS_DIR"]) / f"{os.getpid()}.json"


def _write() -> None:
    with _lock:
        targets = dict(by_target)
        sites = dict(by_site)
    tally = {"wire": dict(counter.wire), "targets": targets, "sites": sites}
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
    from crawlsched.politeness.reservations import Reservations

    local = threading.local()
    log = (Path(folder) / f"{os.getpid()}.sends").open("a", buffering=1)
    reserve, read, send = Reservations._reserve, PoliteHttp._read, httpx.Client.send

    def timed_reserve(self, key, host, policy, patience):
        start = reserve(self, key, host, policy, patience)
        local.planned, local.reserved = start.timestamp(), time.time()
        return start

    def timed_read(self, method, url, *rest):
        local.url, local.planned, local.reserved = url, None, None
        return read(self, method, url, *rest)

    def timed_send(self, request, **kw):
        if getattr(local, "url", None) == str(request.url):
            log.write(json.dumps([local.url, local.planned, time.time(), local.reserved]) + "\n")
        return send(self, request, **kw)

    Reservations._reserve = timed_reserve
    PoliteHttp._read = timed_read
    httpx.Client.send = timed_send


if os.environ.get("BENCH_SEND_LOG"):
    _log_sends(os.environ["BENCH_SEND_LOG"])


# -- what the workers did, for bench_frontier.py --trace (BENCH_TRACE): one JSON line per event


def _trace(folder: str) -> None:
    from crawlsched.actors import handlers
    from crawlsched.actors.sends import Sends
    from crawlsched.crawl import frontier, loop
    from crawlsched.politeness.held_hosts import HostNotReady
    from crawlsched.politeness.reservations import Reservations
    from crawlsched.store.hosts import MongoHostStore

    out = (Path(folder) / f"{os.getpid()}.trace").open("a", buffering=1)

    def put(*row) -> None:
        line = [time.time(), f"{os.getpid()}:{threading.get_ident() % 10_000}", *row]
        out.write(json.dumps(line, default=str) + "\n")

    def around(owner, name: str, before, after=None) -> None:
        """Wrap `owner.name` (a module global the caller looks up at call time, or a method)."""
        inner = getattr(owner, name)

        def wrapped(*args, **kwargs):
            before(*args)
            result = inner(*args, **kwargs)
            if after is not None:
                after(result, *args)
            return result

        setattr(owner, name, wrapped)

    # a batch: its message taken (batch0/batch1), its crawl loop (each0 with its hosts, each1)
    around(handlers, "crawl_batch", lambda rt, m, *a: put("batch0", m.dispatch_id),
           lambda r, rt, m, *a: put("batch1", m.dispatch_id))  # fmt: skip
    around(loop.Loop, "run",
           lambda self: put("each0", self.c.frontier.message.dispatch_id,
                            sorted({p.host for p in self.pending}), len(self.pending)),
           lambda r, self: put("each1", self.c.frontier.message.dispatch_id))  # fmt: skip
    around(handlers, "plan_discovered", lambda *a: put("plan0"),
           lambda n, *a: put("plan1", n))  # fmt: skip
    around(MongoHostStore, "acquire", lambda *a: None,
           lambda got, store, key, *a: put("acquire", key, type(got[0]).__name__,
                                           getattr(got[0], "why", "")))  # fmt: skip
    around(MongoHostStore, "release", lambda store, key, *a: put("release", key))
    around(frontier, "requeue", lambda *a: None,
           lambda rest, rt, m, *a: put("requeued", m.dispatch_id, rest and rest.dispatch_id))  # fmt: skip
    around(handlers, "admit_waiting", lambda *a: None,
           lambda n, rt, keys, *a: put("admitted", sorted(keys), n))  # fmt: skip
    around(Sends, "crawl", lambda sends, m, *a: put("resent", m.dispatch_id))
    around(Sends, "wake_at", lambda sends, keys, when: put("wake_at", sorted(keys), when))
    reserve = Reservations._reserve

    def traced_reserve(self, key, host, policy, patience):
        try:
            return reserve(self, key, host, policy, patience)
        except HostNotReady as e:  # why a thread set a page aside
            put("not_ready", key, e.why, e.until, e.on_release, e.held_elsewhere)
            raise

    Reservations._reserve = traced_reserve
    around(frontier, "wait_for_hosts",
           lambda rt, m, ids, why, hosts, *a: put("park", m.dispatch_id, sorted(hosts),
                                                  len(ids)))  # fmt: skip


# Workers only (`dramatiq crawlsched.actors`): `run now` never crawls.
if os.environ.get("BENCH_TRACE") and "crawlsched.actors" in " ".join(sys.argv):
    _trace(os.environ["BENCH_SEND_LOG"])
