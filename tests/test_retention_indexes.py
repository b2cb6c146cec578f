"""`crawlsched init-db`'s index definitions create the TTL indexes retention relies on, on the
embedded store and on a MongoDB wire-protocol server (pymongo's `create_index` on the wire)."""

from __future__ import annotations

import pytest

from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.runtime import Runtime
from tests.conftest import settings_for_tests
from tests.support.factories import EMBEDDED, MONGOECO, open_store

# collection -> the field its documents expire by
TTL_FIELDS = {
    **dict.fromkeys(JOB_COLLECTIONS, "expire_at"),
    "task_history": "expire_at",
    "activity": "expire_at",
    "webhook_deliveries": "expire_at",
    "idempotency_keys": "expires_at",
}


@pytest.fixture(params=[EMBEDDED, pytest.param(MONGOECO, marks=pytest.mark.multiprocess)])
def runtime(request):
    for store in open_store(request):
        rt = Runtime(settings_for_tests(mongo_url=store.url, mongo_db=store.db_name))
        yield rt
        if store.kind == MONGOECO:
            rt.db.raw.client.close()


def _ttl_indexes(rt: Runtime, collection: str) -> list[tuple[list, int]]:
    info = rt.db[collection].index_information()
    return [
        ([tuple(k) for k in spec["key"]], int(spec["expireAfterSeconds"]))
        for spec in info.values()
        if "expireAfterSeconds" in spec
    ]


def test_create_indexes_makes_one_ttl_index_per_expiring_collection(runtime):
    runtime.create_indexes()
    runtime.create_indexes()  # init-db again (every start does): the same indexes, no error
    for collection, field in TTL_FIELDS.items():
        # expireAfterSeconds 0: the document's own date says when it goes
        assert _ttl_indexes(runtime, collection) == [([(field, 1)], 0)], collection


def test_collections_that_are_kept_have_no_ttl_index(runtime):
    runtime.create_indexes()
    for collection in ("runs", "schedules", "missed_runs", "core_models", "articles"):
        assert _ttl_indexes(runtime, collection) == [], collection
