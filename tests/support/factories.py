"""Shared test helpers: store backends to parametrize over, ms-precision datetimes, reference data.

STORE_BACKENDS  params for a fixture: the embedded store, and mongoeco (marked multiprocess)
open_store()    the body of such a fixture: yields a `Store`, cleans up afterwards
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from hypothesis import strategies as st

from crawlsched.store.client import drop_embedded, open_database
from crawlsched.store.counting import CommandCounter, CountingDatabase

EMBEDDED, MONGOECO = "embedded", "mongoeco"
STORE_BACKENDS = [EMBEDDED, pytest.param(MONGOECO, marks=pytest.mark.multiprocess)]

# A fixed "now" for store tests; every stored datetime is truncated to ms (what MongoDB keeps).
NOW = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)


def to_ms(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def utc_datetimes(
    min_value: datetime = datetime(2000, 1, 1), max_value: datetime = datetime(2100, 1, 1)
) -> st.SearchStrategy[datetime]:
    """Timezone-aware UTC datetimes at millisecond precision (naive bounds, as hypothesis wants)."""
    return st.datetimes(min_value=min_value, max_value=max_value, timezones=st.just(UTC)).map(to_ms)


@dataclass
class Store:
    """One open test database; `collection()` hands out names never used before in it."""

    kind: str
    db: CountingDatabase
    url: str
    db_name: str
    _names: Iterator[int] = field(default_factory=itertools.count)

    @property
    def is_embedded(self) -> bool:
        return self.kind == EMBEDDED

    def examples(self, embedded: int, mongoeco: int) -> int:
        return embedded if self.is_embedded else mongoeco

    def collection(self, prefix: str = "jobs") -> str:
        return f"{prefix}_{next(self._names)}"


def open_store(request: pytest.FixtureRequest, counter: CommandCounter | None = None):
    """Fixture body: a fresh database on the backend named by `request.param`."""
    if request.param == EMBEDDED:
        url = f"mongomock://{uuid.uuid4().hex}"
        db = open_database(url, "crawlsched", counter)
        try:
            yield Store(EMBEDDED, db, url, "crawlsched")
        finally:
            drop_embedded(url)
        return
    url = request.getfixturevalue("multiprocess_mongo_url")
    name = request.getfixturevalue("mongo_database_name")
    db = open_database(url, name, counter)
    try:
        yield Store(MONGOECO, db, url, name)
    finally:
        client = db.raw.client
        client.drop_database(name)
        client.close()
