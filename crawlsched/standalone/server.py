"""The standalone server: the API, the clock and in-process workers in one process.

Start: load the latest snapshot of the data directory into the embedded store and replay the
journal written after it, write a snapshot of that and journal every write from then on, load
the reference data and default sweeps (safe to repeat), put back the messages a clean stop
saved (or, after a crash, re-drive what the lost ones held: `flow.restart`), then start the
worker threads, the clock, the snapshot thread, the journal's flush thread, the expiry sweep
(what TTL indexes remove on a MongoDB server, every `ttl_sweep_s`) and the API.

Stop (SIGTERM, Ctrl-C): the API stops taking requests, the clock stops, the workers finish the
message in hand and hand the rest back, and one last snapshot saves the store and every message
not yet processed. Between stops a snapshot is written every `snapshot_interval_s`, and every
write is journaled as it is applied (`journal.py`), flushed every `journal_fsync_ms`.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from crawlsched.logs import get_logger
from crawlsched.settings import Settings
from crawlsched.standalone.datadir import DataDir
from crawlsched.store.embedded.ttl import sweep_expired

log = get_logger(__name__)

STORE_URL = "mongomock://standalone"
LOCAL_TOKEN_NAME = "standalone-local"


def standalone_settings(settings: Settings) -> Settings:
    """The settings with the embedded store and the in-process broker, an account-secret key
    (CRAWLSCHED_SECRET_KEY, or one kept in the data directory, made on the first start) and a
    message-signing key the same way: the messages a clean stop saves are checked when the
    next start puts them back."""
    update: dict[str, Any] = {"mongo_url": STORE_URL, "broker_url": "stub://"}
    if settings.secret_key is None:
        update["secret_key"] = SecretStr(DataDir.secret_key(settings.data_dir))
    if settings.message_signing and settings.message_signing_key is None:
        update["message_signing_key"] = SecretStr(DataDir.signing_key(settings.data_dir))
    return settings.model_copy(update=update)


@dataclass
class StartReport:
    snapshot: str | None
    loaded: dict[str, int]
    clean: bool
    restored_messages: int
    recovered: dict[str, Any] | None
    journal: dict[str, Any]


class Periodic(threading.Thread):
    """Call `action` every `period_s` seconds until stopped; a failure is logged, not fatal."""

    def __init__(self, name: str, period_s: float, action: Any) -> None:
        super().__init__(name=name, daemon=True)
        self.period_s = period_s
        self.action = action
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(self.period_s):
            try:
                self.action()
            except Exception:
                log.exception("periodic_failed", task=self.name)

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=60)


class StandaloneServer:
    def __init__(self, settings: Settings, threads: int = 4) -> None:
        self.settings = standalone_settings(settings)
        self.threads = threads
        self.data = DataDir(self.settings.data_dir, self.settings.mongo_db)
        self._snapshot_lock = threading.Lock()
        self.runtime: Any = None
        self.broker: Any = None
        self.worker: Any = None
        self._clock: Periodic | None = None
        self._snapshots: Periodic | None = None
        self._journal_sync: Periodic | None = None
        self._expiry: Periodic | None = None

    # -- start ----------------------------------------------------------------------------

    def start(self) -> StartReport:
        from dramatiq import Worker

        from crawlsched import runtime as runtime_module
        from crawlsched.brokers import setup_broker
        from crawlsched.reference import load_reference
        from crawlsched.standalone.broker import InProcessBroker
        from crawlsched.store.client import drop_embedded

        self.data.acquire()
        drop_embedded(STORE_URL)
        self.broker = setup_broker(self.settings, stub_class=InProcessBroker)
        rt = runtime_module.get_runtime()
        self.runtime = rt
        state = self.data.load_into(rt.db)
        self.data.start_journal(rt.db)  # before the first write of this process
        rt.create_indexes()
        rt.reference.load(load_reference(self.settings.reference_file))
        rt.schedules.ensure_defaults(rt.now())

        from crawlsched.actors import planner, ticker  # declares every queue on the broker

        restored = 0
        recovered = None
        if state["clean"]:
            restored = self.broker.restore(state["messages"])
        else:
            from crawlsched.actors.sends import send_report
            from crawlsched.flow.restart import recover_lost_messages

            recovered = recover_lost_messages(
                rt, lambda sid, at: planner.plan_crawls.send(sid, at.isoformat()), send_report
            )
        self.worker = Worker(self.broker, worker_threads=self.threads)
        self.worker.start()
        self._clock = Periodic("clock", self.settings.clock_interval_s, ticker.tick.send)
        self._clock.start()
        ticker.tick.send()
        self._snapshots = Periodic("snapshots", self.settings.snapshot_interval_s, self.snapshot)
        self._snapshots.start()
        fsync_s = self.settings.journal_fsync_ms / 1000
        self._journal_sync = Periodic("journal", fsync_s, self.sync_journal)
        self._journal_sync.start()
        self.expire()
        self._expiry = Periodic("expiry", self.settings.ttl_sweep_s, self.expire)
        self._expiry.start()
        report = StartReport(
            state["snapshot"], state["loaded"], state["clean"], restored, recovered,
            state["journal"],
        )  # fmt: skip
        log.info("standalone_started", **vars(report))
        return report

    def snapshot(self, messages: list | None = None, clean: bool = False) -> Any:
        with self._snapshot_lock:
            return self.data.snapshot(self.runtime.db, messages, clean)

    def sync_journal(self) -> None:
        """Return once every write applied so far is on disk (the journal's flush)."""
        if self.data.journal is not None:
            self.data.journal.sync()

    def expire(self) -> dict[str, int]:
        """Remove what the TTL indexes say has expired (a MongoDB server's TTL monitor does
        this on its own), under the store's lock: no request sees a half-swept collection."""
        db = self.runtime.db
        with db.locked():
            removed = sweep_expired(db.raw, self.runtime.now())
        if removed:
            log.info("documents_expired", **removed)
        return removed

    def local_token(self) -> str:
        """A new admin token for the command line of this machine; earlier ones are revoked."""
        rt = self.runtime
        for row in rt.tokens.all():
            if row["name"] == LOCAL_TOKEN_NAME and row["revoked_at"] is None:
                rt.tokens.revoke(row["_id"], rt.now())
        _, token = rt.tokens.create("admin", LOCAL_TOKEN_NAME, rt.now())
        return token

    # -- stop -----------------------------------------------------------------------------

    def stop(self) -> Any:
        """Stop everything and write the last snapshot, with the messages not yet processed."""
        started = time.perf_counter()
        if self._snapshots:
            self._snapshots.stop()
        if self._expiry:
            self._expiry.stop()
        if self._journal_sync:
            self._journal_sync.stop()
        if self._clock:
            self._clock.stop()
        if self.worker:
            self.worker.stop(timeout=int(self.settings.crawl_time_limit_s * 1000))
        messages = self.broker.pending() if self.broker else []
        stats = self.snapshot(messages, clean=True)
        self.data.close_journal(self.runtime.db)
        self.data.remove_api()
        log.info(
            "standalone_stopped",
            messages_saved=len(messages),
            snapshot=stats.number,
            took_s=round(time.perf_counter() - started, 2),
        )
        return stats


def serve(settings: Settings, host: str, port: int, threads: int) -> None:
    """Run the standalone server until SIGTERM or Ctrl-C."""
    from crawlsched.api import create_app
    from crawlsched.api.serving import api_server

    server = StandaloneServer(settings, threads)
    report = server.start()
    from crawlsched.standalone.durable import DurableBeforeAnswer

    app = create_app(server.runtime, delivers=True)
    # A write is answered once the journal holding it is on disk: no crash loses it.
    durable = DurableBeforeAnswer(app, server.sync_journal)
    web = api_server(durable, host, port, server.settings)
    announcer = threading.Thread(target=_announce, args=(server, web, host, report), daemon=True)
    announcer.start()
    # uvicorn handles SIGTERM and SIGINT while it serves, then restores the handlers it found
    # and raises the signal again: these make that second delivery a no-op, so the clean stop
    # below runs (a default handler would end the process before it saved anything).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stopping)
    try:
        web.run()  # returns on SIGTERM or SIGINT
    finally:
        server.stop()


def _stopping(signum: int, frame: Any) -> None:
    """A stop signal during the clean stop: it is already under way."""


def _announce(server: StandaloneServer, web: Any, host: str, report: StartReport) -> None:
    """Once uvicorn listens: write the address and a local token for the command line."""
    while not web.started:
        if web.should_exit:
            return
        time.sleep(0.05)
    port = web.servers[0].sockets[0].getsockname()[1]
    url = f"http://{host}:{port}"
    server.data.write_api(url, server.local_token())
    jobs = sum(n for name, n in report.loaded.items() if name in ("profiles", "websites"))
    origin = f"snapshot {report.snapshot}" if report.snapshot else "an empty data directory"
    if report.journal["records"]:
        origin += f" and {report.journal['records']} journaled writes"
    if report.journal["stopped"]:
        origin += f"; journal replay stopped early: {report.journal['stopped']}"
    recovery = "" if report.clean else " (after an unclean stop: lost work re-driven)"
    print(
        f"crawlsched standalone: API and status page at {url}, data in {server.data.root} "
        f"({origin}, {jobs} jobs{recovery})",
        flush=True,
    )
