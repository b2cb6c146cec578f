"""`GET /v1/runs` as JSON, each run's row encoded once per revision of the run (and, on the
embedded store, each page kept whole until a run is written).

A page of 100 runs is mostly ended runs that no longer change: the page reads each listed
run's id and revision (`MongoRunStore.page_revisions`, a small projection), reuses the encoded
row of every run whose revision it has seen, and reads and encodes only the others. Every
write of a run sets a new revision, so a reused row is always the run as it is stored now.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any, cast

import pydantic_core

from crawlsched.api.paging import page_json
from crawlsched.encoding import plain
from crawlsched.store.runs import MongoRunStore

# About 600 bytes a row: some 12 MB at most, for runs read in pages of up to 1,000.
CAPACITY = 20_000
# Whole pages kept while no run is written (the embedded store says so: `write_mark`), at most
# about 10 MB for pages of up to 1,000 rows.
PAGES = 16


class EncodedRows:
    """JSON rows by id, each valid for one revision; at most `capacity`, the oldest stored
    dropped first. Safe to share between threads: an entry is one (revision, row) tuple."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self._capacity = capacity
        self._rows: dict[Hashable, tuple[Any, bytes]] = {}
        self._pages: dict[Hashable, tuple[Any, bytes]] = {}  # page key -> (write mark, JSON)
        self._lock = threading.Lock()

    def get(self, key: Hashable, revision: Any) -> bytes | None:
        """The row stored for `key` at `revision`; None for another revision or none."""
        return self.get_many([(key, revision)])[0]

    def get_many(self, listed: list[tuple[Hashable, Any]]) -> list[bytes | None]:
        """`get` of each (key, revision); a None revision has no row. The same revision object
        is compared by identity first (the embedded store hands out the stored ObjectId)."""
        rows = self._rows
        found: list[bytes | None] = []
        for key, revision in listed:
            entry = rows.get(key)
            if entry is None or revision is None:
                found.append(None)
            elif entry[0] is revision or entry[0] == revision:
                found.append(entry[1])
            else:
                found.append(None)
        return found

    def put(self, key: Hashable, revision: Any, row: bytes) -> None:
        with self._lock:
            self._rows.pop(key, None)  # stored again: the newest
            self._rows[key] = (revision, row)
            while len(self._rows) > self._capacity:
                del self._rows[next(iter(self._rows))]

    def page(self, key: Hashable, mark: Any) -> bytes | None:
        """The whole page stored for `key` under this write mark; None for another or none."""
        entry = self._pages.get(key)
        return entry[1] if entry is not None and mark is not None and entry[0] == mark else None

    def put_page(self, key: Hashable, mark: Any, page: bytes) -> None:
        with self._lock:
            self._pages.pop(key, None)
            self._pages[key] = (mark, page)
            while len(self._pages) > PAGES:
                del self._pages[next(iter(self._pages))]

    def __len__(self) -> int:
        return len(self._rows)


def encode_row(doc: dict[str, Any]) -> bytes:
    """One item of a page as `page_json` of the whole page would encode it."""
    return pydantic_core.to_json(plain(doc))


def runs_page(
    runs: MongoRunStore,
    rows: EncodedRows,
    limit: int,
    offset: int,
    state: str | None = None,
    schedule_id: str | None = None,
    empty: bool = True,
) -> bytes:
    """The JSON of `page_of(runs.page(limit + 1, offset, …), limit, offset)`, byte for byte.

    Where the store marks its writes (the embedded store), a page read while no run was
    written is answered again as it is until a run is written (a status page polled while
    nothing runs reads nothing)."""
    key = (limit, offset, state, schedule_id, empty)
    # Marked before the read: a write during it moves the mark, so the page is read again.
    mark = runs.write_mark()
    if (kept := rows.page(key, mark)) is not None:
        return kept
    body = _read_page(runs, rows, limit, offset, state, schedule_id, empty)
    if mark is not None:
        rows.put_page(key, mark, body)
    return body


def _read_page(
    runs: MongoRunStore,
    rows: EncodedRows,
    limit: int,
    offset: int,
    state: str | None,
    schedule_id: str | None,
    empty: bool,
) -> bytes:
    listed = runs.page_revisions(limit + 1, offset, state, schedule_id, empty)
    more = len(listed) > limit
    listed = listed[:limit]
    encoded = rows.get_many(listed)
    missing = [run_id for (run_id, _), row in zip(listed, encoded, strict=True) if row is None]
    if missing:
        read = runs.summaries(missing)
        if len(read) < len(missing):  # one went since it was listed: read the page whole
            whole = runs.page(limit + 1, offset, state, schedule_id, empty)
            rows_read = [encode_row(doc) for doc in whole[:limit]]
            return page_json(rows_read, limit, offset, len(whole) > limit)
        for position, (run_id, _) in enumerate(listed):
            if encoded[position] is None:
                revision, doc = read[run_id]
                encoded[position] = row = encode_row(doc)
                if revision is not None:
                    rows.put(run_id, revision, row)
    return page_json(cast("list[bytes]", encoded), limit, offset, more)  # every one filled
