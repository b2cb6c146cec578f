"""Serve mongoeco's in-memory engine over the MongoDB wire protocol.

Runs inside the Python 3.13 venv made by ``mongo_server.ensure_mongoeco_venv`` (mongoeco needs
3.13; the project runs on 3.11), so it may import only the stdlib and mongoeco.

    python mongoeco_serve.py --host 127.0.0.1 --port 0

prints one line ``ready <port> <uri>`` once the socket listens. Port 0 lets the kernel pick a free
port, so there is no window between "find a free port" and "bind it" for another process to steal.
SIGTERM/SIGINT close the server and exit 0. End-of-file on stdin does the same: the harness holds
the write end of that pipe, so if pytest dies (even by SIGKILL) the server does not linger.
"""

import argparse
import asyncio
import signal
import sys

from mongoeco.core.filtering import QueryEngine
from mongoeco.engines.memory import MemoryEngine
from mongoeco.engines.virtual_indexes import document_in_virtual_index
from mongoeco.wire.proxy import AsyncMongoEcoProxyServer


def _same_index_entry(index: dict, candidate: dict, current: dict) -> bool:
    """Whether a document written over `current` files under `index` exactly as it did: the
    same membership (sparse, partial filter) and the same values of every indexed field."""
    if document_in_virtual_index(candidate, index) != document_in_virtual_index(current, index):
        return False
    return all(
        QueryEngine.extract_values(candidate, name) == QueryEngine.extract_values(current, name)
        for name in index["fields"]
    )


def check_only_changed_unique_keys() -> None:
    """Make a write that leaves a document's unique keys as they were skip their check.

    mongoeco checks a compound (or partial, or collated) unique index by comparing the written
    document with every document of the collection, and the `_id` of an updated document the
    same way: a job update cost 54 ms with 500 jobs and grew with every job, where MongoDB
    walks its B-tree. A write that changes none of an index's fields and keeps its membership
    cannot add a duplicate to a collection that had none, so only the indexes whose entry
    changes are checked; inserts and key changes are checked as before."""
    ensure = MemoryEngine._ensure_unique_indexes

    def ensure_changed(self, db_name, coll_name, candidate, **options):
        exclude = options.get("exclude_storage_key")
        if exclude is not None:
            storage = options.get("storage_view")
            coll = (
                (self._storage if storage is None else storage).get(db_name, {}).get(coll_name, {})
            )
            data = coll.get(exclude)
            if data is None:
                data = coll.get(self._storage_key(exclude))
            if data is not None:
                current = self._borrow_storage_document(data)
                if candidate.get("_id") == current.get("_id"):
                    options["scan_payload_id"] = False  # its own _id, already unique
                view = options.get("indexes_view")
                indexes = (
                    (self._indexes if view is None else view).get(db_name, {}).get(coll_name, [])
                )
                changed = [
                    index
                    for index in indexes
                    if not index.get("unique") or not _same_index_entry(index, candidate, current)
                ]
                if len(changed) < len(indexes):
                    options["indexes_view"] = {db_name: {coll_name: changed}}
        return ensure(self, db_name, coll_name, candidate, **options)

    MemoryEngine._ensure_unique_indexes = ensure_changed


async def _wait_for_stdin_eof(stop: asyncio.Event) -> None:
    # Read stdin on the event loop rather than in a thread: a daemon thread blocked in
    # sys.stdin.read() makes interpreter shutdown abort ("could not acquire lock ... <stdin>").
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except ValueError:  # stdin is a regular file: nothing to watch
        return
    while await reader.read(4096):
        pass
    stop.set()


async def serve(host: str, port: int, watch_stdin: bool) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    watcher = asyncio.create_task(_wait_for_stdin_eof(stop)) if watch_stdin else None
    async with AsyncMongoEcoProxyServer(host=host, port=port) as server:
        address = server.address
        print("ready", address.port, address.uri, flush=True)
        await stop.wait()
    if watcher is not None:
        watcher.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--no-stdin-watch",
        action="store_true",
        help="keep serving when stdin closes (for running by hand in the background)",
    )
    args = parser.parse_args()
    check_only_changed_unique_keys()
    asyncio.run(serve(args.host, args.port, watch_stdin=not args.no_stdin_watch))


if __name__ == "__main__":
    main()
