"""Open the MongoDB database named by the settings: a real server or the embedded mongomock.

Every store receives a `Database`; a store handed a database never closes its client.
"""

from __future__ import annotations

import threading

import mongomock
import pymongo
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from crawlsched.store import embedded
from crawlsched.store.counting import CommandCounter, CountingDatabase
from crawlsched.store.embedded.effects import StoreLock, WriteEffects, attach_effects

# mongomock keeps its data inside the client object, so every part of one process (CLI, planner,
# in-process worker threads) must share one client per URL or they would see different databases.
# mongomock's own lock guards its dictionaries, not the find-then-modify of an update, so two
# threads could both win a conditional update (a claim, a lease). One lock per embedded client
# makes every operation atomic, as each single-document operation is on a real server. The
# standalone server's journal hangs on the same lock (`record_writes`).
_embedded_clients: dict[str, tuple[mongomock.MongoClient, StoreLock]] = {}
_embedded_lock = threading.Lock()


def _embedded_client(url: str) -> tuple[mongomock.MongoClient, StoreLock]:
    embedded.install()  # indexed collections: cost per job stays flat (see store/embedded/)
    with _embedded_lock:
        if url not in _embedded_clients:
            _embedded_clients[url] = (mongomock.MongoClient(tz_aware=True), StoreLock())
        return _embedded_clients[url]


def record_writes(db: CountingDatabase, effects: WriteEffects | None) -> None:
    """Report what every later write to the embedded database `db` does to `effects`, one
    record per operation, in the order applied (`store/embedded/effects.py`); None: stop."""
    lock = db.locked()
    if not isinstance(lock, StoreLock):
        raise ValueError("only the embedded store's writes can be recorded")
    attach_effects(db.raw, lock, effects)


def drop_embedded(url: str = "mongomock://") -> None:
    """Forget an embedded database (tests and the demo start from empty)."""
    with _embedded_lock:
        _embedded_clients.pop(url, None)


def _ping(client: pymongo.MongoClient, timeout_s: float) -> None:
    for attempt in Retrying(
        retry=retry_if_exception_type(pymongo.errors.ConnectionFailure),
        wait=wait_exponential(multiplier=0.2, max=5),
        stop=stop_after_delay(timeout_s),
        reraise=True,
    ):
        with attempt:
            client.admin.command("ping")


def open_database(
    mongo_url: str,
    db_name: str,
    counter: CommandCounter | None = None,
    connect_timeout_s: float = 5.0,
) -> CountingDatabase:
    """Connect (retrying a server that is still starting, for up to `connect_timeout_s`) and
    return the database; pymongo's ConnectionFailure past that.

    `counter`, when given, counts commands at the store boundary; on a real server the same
    counter also receives pymongo's command-monitoring events so the two can be compared.
    """
    counter = counter or CommandCounter()
    if mongo_url.startswith("mongomock://"):
        client, lock = _embedded_client(mongo_url)
        return CountingDatabase(client[db_name], counter, lock)
    server = pymongo.MongoClient(
        mongo_url,
        tz_aware=True,
        event_listeners=[counter.listener],
        appname="crawlsched",
        # Each try gives up within the timeout (pymongo's default is 30 s).
        serverSelectionTimeoutMS=int(connect_timeout_s * 1000),
        connectTimeoutMS=int(connect_timeout_s * 1000),
    )
    _ping(server, connect_timeout_s)
    return CountingDatabase(server[db_name], counter)
