"""A snapshot re-encodes only the documents written since the last one, and is still exactly
the whole store: random inserts, updates (simple and mongomock's own), upserts, replaces,
deletes and drops, with snapshots in between, each compared byte for byte with every
document of the store encoded afresh, and loaded back into an empty store."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import bson
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from crawlsched.standalone.datadir import DataDir
from crawlsched.store.client import drop_embedded, open_database

NAMES = ("jobs", "runs")
ids = st.integers(0, 7)
values = st.one_of(st.integers(0, 3), st.sampled_from(["a", "b"]), st.lists(st.integers(0, 2)))


def _whole(db, name: str) -> bytes:
    return b"".join(bson.encode(doc) for doc in db.raw[name]._store.documents)


class Snapshots(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.url = f"mongomock://snapshots-{id(self)}"
        drop_embedded(self.url)
        self.db = open_database(self.url, "crawlsched")
        self.root = Path(tempfile.mkdtemp(prefix="crawlsched-snapshots-"))
        self.data = DataDir(self.root, "crawlsched")
        self.snapshots = 0

    @rule(name=st.sampled_from(NAMES), doc_id=ids, value=values)
    def insert(self, name, doc_id, value):
        if self.db[name].find_one({"_id": doc_id}) is None:
            self.db[name].insert_one({"_id": doc_id, "v": value})

    @rule(name=st.sampled_from(NAMES), doc_id=ids, value=values)
    def set_field(self, name, doc_id, value):
        self.db[name].update_one({"_id": doc_id}, {"$set": {"v": value}})

    @rule(name=st.sampled_from(NAMES), doc_id=ids, value=st.integers(0, 3))
    def push(self, name, doc_id, value):  # not a simple step: mongomock's own update
        self.db[name].update_one({"_id": doc_id}, {"$push": {"list": value}})

    @rule(name=st.sampled_from(NAMES), doc_id=ids, value=values)
    def upsert(self, name, doc_id, value):
        self.db[name].update_one({"_id": doc_id}, {"$set": {"u": value}}, upsert=True)

    @rule(name=st.sampled_from(NAMES), doc_id=ids, value=values)
    def replace(self, name, doc_id, value):
        self.db[name].replace_one({"_id": doc_id}, {"r": value})

    @rule(name=st.sampled_from(NAMES), doc_id=ids)
    def find_and_bump(self, name, doc_id):
        self.db[name].find_one_and_update({"_id": doc_id}, {"$inc": {"n": 1}})

    @rule(name=st.sampled_from(NAMES), value=values)
    def update_many(self, name, value):
        self.db[name].update_many({}, {"$set": {"m": value}})

    @rule(name=st.sampled_from(NAMES), doc_id=ids)
    def delete(self, name, doc_id):
        self.db[name].delete_one({"_id": doc_id})

    @rule(name=st.sampled_from(NAMES))
    def drop(self, name):
        self.db[name].drop()

    @rule()
    def snapshot(self):
        self.data.snapshot(self.db)
        self.snapshots += 1
        folder = self.data.latest() / "crawlsched"
        for name in self.db.raw.list_collection_names():
            assert (folder / f"{name}.bson").read_bytes() == _whole(self.db, name), name

    @invariant()
    def loads_back(self):
        if not self.snapshots:
            return
        url = f"{self.url}-load"
        drop_embedded(url)
        copy = open_database(url, "crawlsched")
        self.data.load_into(copy)
        # What the last snapshot holds is what the store held then; checked in `snapshot`.
        for name in copy.raw.list_collection_names():
            assert (
                _whole(copy, name)
                == (self.data.latest() / "crawlsched" / f"{name}.bson").read_bytes()
            )
        drop_embedded(url)

    def teardown(self):
        drop_embedded(self.url)
        shutil.rmtree(self.root, ignore_errors=True)


Snapshots.TestCase.settings = settings(max_examples=60, stateful_step_count=30)
test_snapshots_are_the_whole_store = Snapshots.TestCase
