"""Shared fixtures. Harness logic lives in tests/support; fixtures here stay thin."""

import os
from collections.abc import Iterator

import pytest
from pymongo.errors import PyMongoError

from tests.support.mongo_server import (
    MongoecoServer,
    drop_session_databases,
    fresh_database_name,
    ping,
)
from tests.support.services import service_unavailable

TEST_MONGO_URL_ENV = "CRAWLSCHED_TEST_MONGO_URL"


@pytest.fixture(scope="session")
def multiprocess_mongo_url() -> Iterator[str]:
    """A MongoDB URL that several OS processes can share for the whole session.

    A real mongod when CRAWLSCHED_TEST_MONGO_URL is set, else a mongoeco server we start.
    Tests must keep their data apart with `mongo_database_name`.
    """
    if url := os.environ.get(TEST_MONGO_URL_ENV):
        try:
            ping(url, timeout=10)
        except PyMongoError as exc:
            service_unavailable(f"{TEST_MONGO_URL_ENV}={url} does not answer ping: {exc}")
        yield url
        drop_session_databases(url)
        return
    try:
        server = MongoecoServer().start()
    except (RuntimeError, OSError) as exc:
        service_unavailable(f"multi-process MongoDB (mongoeco) unavailable: {exc}")
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def mongo_database_name(request: pytest.FixtureRequest) -> str:
    """A database name unique to this test, so tests sharing one server never see each other."""
    return fresh_database_name(request.node.name)
