"""A saved item's content hash is a function of what it says, not of how its keys are ordered:
the same document saved again with its keys (and its sub-documents' keys) in another order
counts unchanged, and the stored document keeps its first hash."""

from __future__ import annotations

import pytest

from crawlsched.store.client import drop_embedded, open_database
from crawlsched.store.counting import CountingDatabase
from crawlsched.store.results import Item, MongoResultStore
from tests.support.factories import NOW

CONTEXT = {"media_name": "web", "run_id": "r1", "task": "pages"}


@pytest.fixture
def db(embedded_mongo_url):
    db = open_database(embedded_mongo_url, "crawlsched")
    yield db
    drop_embedded(embedded_mongo_url)


def _save(db: CountingDatabase, doc: dict) -> dict:
    store = MongoResultStore(db)
    return store.save([Item("job1", "article", doc)], {"article": "m1"}, CONTEXT, NOW)["job1"]


def test_a_reordered_document_counts_unchanged(db):
    first = {
        "key": "k",
        "title": "t",
        "links": ["a", "b"],
        "meta": {"x": 1, "y": [{"p": 1, "q": 2}]},
    }
    reordered = {
        "meta": {"y": [{"q": 2, "p": 1}], "x": 1},
        "links": ["a", "b"],
        "title": "t",
        "key": "k",
    }
    assert list(first) != list(reordered)
    assert _save(db, first) == {"new": 1}
    hash_before = db.articles.find_one({"key": "k"})["content_hash"]
    assert _save(db, reordered) == {"unchanged": 1}
    stored = list(db.articles.find({"key": "k"}))
    assert len(stored) == 1 and stored[0]["content_hash"] == hash_before


def test_a_changed_value_or_list_order_counts_changed(db):
    # The hash is not blind: a list's order is content.
    _save(db, {"key": "k", "links": ["a", "b"]})
    assert _save(db, {"key": "k", "links": ["b", "a"]}) == {"changed": 1}
    assert _save(db, {"key": "k", "links": ["b", "a"], "title": "new"}) == {"changed": 1}
