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

from bson import ObjectId
from mongoeco.core.filtering import QueryEngine
from mongoeco.core.identity import id_contains_numeric_value
from mongoeco.core.query_plan import AndCondition, EqualsCondition, InCondition
from mongoeco.engines.memory import MemoryEngine, _MemoryIndexedCandidates
from mongoeco.engines.virtual_indexes import (
    _index_partial_filter_expression,
    _index_sparse,
    document_in_virtual_index,
    query_can_use_index,
)
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


def _free_in_key_map(engine, index: dict, candidate: dict, holders_map, exclude) -> bool:
    """Whether the key map mongoeco keeps for a compound index (for its queries, updated with
    every write) shows no other document under the candidate's key. Only for keys of one
    plain value per field (no array, document or missing field) and no collation: there the
    map's key and the uniqueness key are the same tuple."""
    fields = index["fields"]
    if holders_map is None or len(fields) < 2 or index.get("collation") is not None:
        return False
    for name in fields:
        values = QueryEngine.extract_values(candidate, name)
        if len(values) != 1 or values[0] is None or isinstance(values[0], list | dict):
            return False
    holders = holders_map.get(engine._index_key(candidate, fields))
    if not holders:
        return True
    own = set() if exclude is None else {exclude, engine._storage_key(exclude)}
    return all(holder in own for holder in holders)


def check_unique_keys_by_lookup() -> None:
    """Check a write's unique keys by lookup instead of comparison with every document.

    mongoeco checks a compound (or partial, or collated) unique index by comparing the written
    document with every document of the collection, and an updated document's `_id` the same
    way: a job update cost 54 ms with 500 jobs, a result's upsert 106 ms with some 600, and
    both grew with the collection, where MongoDB walks its B-tree. Here an index is left out
    of the check when the write keeps its entry as it was (it cannot add a duplicate to a
    collection that had none), or when mongoeco's own key map for the index shows nobody
    else under the written key; every other case, duplicates included, goes through
    mongoeco's own check and error. Stored documents with an array in a compound unique
    index's fields would escape the lookup (the map files an array under its first element):
    crawlsched's never have one."""
    ensure = MemoryEngine._ensure_unique_indexes

    def ensure_by_lookup(self, db_name, coll_name, candidate, **options):
        storage = options.get("storage_view")
        coll = (self._storage if storage is None else storage).get(db_name, {}).get(coll_name, {})
        exclude = options.get("exclude_storage_key")
        current = None
        if exclude is not None:
            data = coll.get(exclude)
            if data is None:
                data = coll.get(self._storage_key(exclude))
            if data is not None:
                current = self._borrow_storage_document(data)
                if candidate.get("_id") == current.get("_id"):
                    options["scan_payload_id"] = False  # its own _id, already unique
        elif "_id" in candidate and not id_contains_numeric_value(candidate["_id"]):
            # A new document: mongoeco compares its _id with every stored one, for numbers
            # equal across types (1 and 1.0); any other _id is found by its storage key.
            options["scan_payload_id"] = False
        view = options.get("indexes_view")
        indexes = (self._indexes if view is None else view).get(db_name, {}).get(coll_name, [])
        maps = options.get("index_data_view")
        maps = (self._index_data if maps is None else maps).get(db_name, {}).get(coll_name, {})

        def settled(index: dict) -> bool:
            if not index.get("unique"):
                return False
            if current is not None and _same_index_entry(index, candidate, current):
                return True
            return document_in_virtual_index(candidate, index) and _free_in_key_map(
                self, index, candidate, maps.get(index["name"]), exclude
            )

        checked = [index for index in indexes if not settled(index)]
        if len(checked) < len(indexes):
            options["indexes_view"] = {db_name: {coll_name: checked}}
        return ensure(self, db_name, coll_name, candidate, **options)

    MemoryEngine._ensure_unique_indexes = ensure_by_lookup


def _plain_equalities(plan) -> dict:
    """The query's top-level `field == value` conditions on strings and ObjectIds (the values
    whose key is their own: no array, document or null, which match more than their key, and
    no number or date, equal across types or zones), by field."""
    clauses = plan.clauses if isinstance(plan, AndCondition) else (plan,)
    found: dict = {}
    for clause in clauses:
        if not isinstance(clause, EqualsCondition) or clause.null_matches_undefined:
            continue
        if not isinstance(clause.value, str | ObjectId):
            continue  # dates, numbers and the rest compare across types and zones: a scan
        if clause.field in found and found[clause.field] != clause.value:
            return {}  # asks for two values at once: leave it to the scan
        found[clause.field] = clause.value
    return found


def _listed_ids(plan) -> tuple | None:
    """The ids of a top-level `_id: {$in: [...]}` of strings or ObjectIds (a number would also
    match its equal of another type), found by their storage keys; None when there is none."""
    clauses = plan.clauses if isinstance(plan, AndCondition) else (plan,)
    for clause in clauses:
        plain = isinstance(clause, InCondition) and clause.field == "_id"
        if plain and all(isinstance(v, str | ObjectId) for v in clause.values):
            return clause.values
    return None


def plan_compound_and_sparse_lookups() -> None:
    """Let a query's equalities use a compound unique index, or a sparse one-field index.

    mongoeco narrows a query's candidates by an index only for a one-field, non-sparse index;
    anything else reads every document of the collection (a result's upsert by its natural key
    took 18 ms with 2,000 results, a job update by `dispatch_id` 25 ms). Here, when mongoeco
    found no index to use, a query with an equality on every field of a compound unique index
    (not sparse, not partial), or on the field of a sparse one-field index (a plain value only
    matches documents that have the field), takes its candidates from that index's key map,
    and one with `_id: {$in: [...]}` from the listed ids; every candidate is still tested
    against the whole query. A stored document with an array
    in a compound index's field is filed under its first element only and would be missed:
    crawlsched's never have one."""
    plan = MemoryEngine._indexed_candidate_storage_keys_for_plan_locked

    def with_lookups(self, indexes, index_data, query_plan, *, dialect, collation):
        found = plan(self, indexes, index_data, query_plan, dialect=dialect, collation=collation)
        if found is not None or collation is not None:
            return found
        equals = _plain_equalities(query_plan)
        for index in indexes if equals else ():
            fields = index["fields"]
            if not set(fields) <= equals.keys() or index.get("collation") is not None:
                continue
            if _index_partial_filter_expression(index) is not None:
                continue
            if len(fields) > 1:
                usable = index.get("unique") and not _index_sparse(index)
                usable = usable and query_can_use_index(index, query_plan, dialect=dialect)
            else:
                usable = _index_sparse(index)
            keys = index_data.get(index["name"])
            if not usable or keys is None:
                continue
            key = tuple(self._index_equality_key(equals[name]) for name in fields)
            return _MemoryIndexedCandidates(set(keys.get(key, ())))
        ids = _listed_ids(query_plan)
        return (
            None if ids is None else _MemoryIndexedCandidates({self._storage_key(i) for i in ids})
        )

    MemoryEngine._indexed_candidate_storage_keys_for_plan_locked = with_lookups


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
    check_unique_keys_by_lookup()
    plan_compound_and_sparse_lookups()
    asyncio.run(serve(args.host, args.port, watch_stdin=not args.no_stdin_watch))


if __name__ == "__main__":
    main()
