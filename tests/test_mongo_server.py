"""The multi-process MongoDB harness does what the process-level tests rely on."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import pymongo
import pytest
from bson import ObjectId
from pymongo.errors import ServerSelectionTimeoutError

from tests.support.mongo_server import MongoecoServer, fresh_database_name, ping
from tests.support.services import service_unavailable

# Run in a fresh 3.11 interpreter: argv = url, database, writer name. Prints the writer's pid.
WRITE = textwrap.dedent(
    """
    import os, sys, pymongo
    url, database, writer = sys.argv[1:4]
    with pymongo.MongoClient(url) as client:
        client[database].writes.insert_one({"writer": writer, "pid": os.getpid()})
    print(os.getpid())
    """
)
# argv = url, database. Prints the documents it sees as JSON.
READ = textwrap.dedent(
    """
    import json, sys, pymongo
    url, database = sys.argv[1:3]
    with pymongo.MongoClient(url) as client:
        docs = list(client[database].writes.find({}, {"_id": 0}).sort("writer"))
    print(json.dumps(docs))
    """
)


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _output(process: subprocess.Popen[str]) -> str:
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    return stdout.strip()


@pytest.mark.multiprocess
def test_mongo_server_shares_writes_between_processes(
    multiprocess_mongo_url: str, mongo_database_name: str
) -> None:
    # Given two writer processes running at the same time
    writers = {
        name: _python(WRITE, multiprocess_mongo_url, mongo_database_name, name)
        for name in ("a", "b")
    }
    pids = {name: int(_output(process)) for name, process in writers.items()}

    # When a third process reads the collection
    seen = json.loads(_output(_python(READ, multiprocess_mongo_url, mongo_database_name)))

    # Then it sees both writes, made by two different processes that are not this one
    assert seen == [{"writer": "a", "pid": pids["a"]}, {"writer": "b", "pid": pids["b"]}]
    assert len({pids["a"], pids["b"], os.getpid()}) == 3


@pytest.mark.multiprocess
def test_mongo_server_keeps_test_databases_apart(multiprocess_mongo_url: str) -> None:
    first, second = fresh_database_name("same_test"), fresh_database_name("same_test")
    assert first != second
    with pymongo.MongoClient(multiprocess_mongo_url) as client:
        client[first].writes.insert_one({"n": 1})
        assert client[second].writes.count_documents({}) == 0


@pytest.mark.multiprocess
def test_mongo_server_refuses_connections_once_stopped() -> None:
    try:
        server = MongoecoServer().start()
    except RuntimeError as exc:
        service_unavailable(str(exc))
    with server:
        port, url = server.port, server.url
        ping(url)

    # SIGTERM ended it cleanly (not by the SIGKILL fallback), and nothing listens on the port.
    assert server.process is not None
    assert server.process.returncode == 0, server.stderr_text
    with pytest.raises(ServerSelectionTimeoutError):
        ping(url, timeout=0.5)
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), 1):
        pass


def test_mongo_server_start_failure_reports_server_stderr() -> None:
    # This interpreter (3.11) has no mongoeco, so the serving script dies on its import.
    server = MongoecoServer(python=sys.executable, start_timeout=10)

    with pytest.raises(RuntimeError, match=r"(?s)failed to start.*No module named 'mongoeco'"):
        server.start()
    assert server.process is not None
    assert server.process.poll() is not None


@pytest.mark.multiprocess
def test_mongo_server_still_refuses_every_duplicate_of_a_compound_unique_index(
    multiprocess_mongo_url: str, mongo_database_name: str
) -> None:
    # The server checks a write's unique keys only when they change (a job update once cost
    # a scan of every job): each way of making a duplicate is still refused.
    with pymongo.MongoClient(multiprocess_mongo_url) as client:
        jobs = client[mongo_database_name].jobs
        jobs.create_index(
            [("media", 1), ("target", 1)],
            unique=True,
            partialFilterExpression={"target": {"$type": "string"}},
        )
        jobs.insert_many(
            [
                {"_id": "a", "media": "m", "target": "x", "n": 0},
                {"_id": "b", "media": "m", "target": "y", "n": 0},
                {"_id": "c", "media": "m", "n": 0},  # outside the partial index
            ]
        )
        jobs.update_one({"_id": "a"}, {"$inc": {"n": 1}})  # keys unchanged: written
        jobs.update_one({"_id": "b"}, {"$set": {"target": "z"}})  # a new key: written
        duplicates = [
            lambda: jobs.insert_one({"_id": "d", "media": "m", "target": "x"}),
            lambda: jobs.update_one({"_id": "b"}, {"$set": {"target": "x"}}),
            lambda: jobs.update_one({"_id": "c"}, {"$set": {"target": "x"}}),  # joins the index
            lambda: jobs.replace_one({"_id": "b"}, {"media": "m", "target": "x"}),
            lambda: jobs.find_one_and_update({"_id": "b"}, {"$set": {"target": "x"}}),
            lambda: jobs.update_one(
                {"_id": "e"}, {"$set": {"media": "m", "target": "x", "n": 0}}, upsert=True
            ),
        ]
        for write in duplicates:
            with pytest.raises(pymongo.errors.DuplicateKeyError):
                write()
        # A key given up is free again; a batch that repeats a key stops at the repeat.
        jobs.insert_one({"_id": "f", "media": "m", "target": "y", "n": 0})
        with pytest.raises(pymongo.errors.BulkWriteError):
            jobs.insert_many(
                [
                    {"_id": "g", "media": "m", "target": "w", "n": 0},
                    {"_id": "h", "media": "m", "target": "w", "n": 0},
                ]
            )
        assert {d["_id"]: (d.get("target"), d["n"]) for d in jobs.find()} == {
            "a": ("x", 1),
            "b": ("z", 0),
            "c": (None, 0),
            "f": ("y", 0),
            "g": ("w", 0),
        }


@pytest.mark.multiprocess
def test_mongo_server_finds_by_compound_and_sparse_indexes_what_a_scan_finds(
    multiprocess_mongo_url: str, mongo_database_name: str
) -> None:
    # The server takes a query's candidates from a compound unique index or a sparse one, and
    # looks a new _id up by its storage key: the answers are a full scan's, ids still unique.
    with pymongo.MongoClient(multiprocess_mongo_url) as client:
        items = client[mongo_database_name].items
        items.create_index([("model", 1), ("key", 1)], unique=True, name="natural_key")
        items.create_index([("batch", 1)], sparse=True, name="batch")
        items.insert_many(
            [
                {"_id": f"i{n}", "model": f"m{n % 2}", "key": f"k{n % 3}", "batch": f"b{n % 2}"}
                for n in range(6)
            ]
            + [{"_id": "lone", "model": "m0", "key": "k9"}]  # outside the sparse index
        )
        assert [d["_id"] for d in items.find({"model": "m1", "key": "k2"})] == ["i5"]
        assert [d["_id"] for d in items.find({"key": "k0", "model": "m0", "batch": "b0"})] == ["i0"]
        assert items.count_documents({"model": "m1", "key": "k9"}) == 0
        assert sorted(d["_id"] for d in items.find({"batch": "b1"})) == ["i1", "i3", "i5"]
        assert items.update_many({"batch": "b0"}, {"$set": {"seen": True}}).modified_count == 3
        assert sorted(d["_id"] for d in items.find({"seen": True})) == ["i0", "i2", "i4"]
        assert items.count_documents({"batch": None}) == 1  # null: the scan's answer
        listed = items.find({"_id": {"$in": ["i4", "i1", "gone"]}, "batch": "b1"})
        assert [d["_id"] for d in listed] == ["i1"]
        assert items.count_documents({"_id": {"$in": []}}) == 0
        # An upsert by the natural key updates the one document, or inserts one
        items.update_one({"model": "m0", "key": "k9"}, {"$set": {"v": 1}}, upsert=True)
        items.update_one({"model": "m2", "key": "k0"}, {"$set": {"v": 2}}, upsert=True)
        assert items.find_one({"_id": "lone"})["v"] == 1
        assert items.count_documents({}) == 8
        # A new document's _id is still unique, numbers equal across types included
        for duplicate in ({"_id": "i0"}, {"_id": ObjectId(items.find_one({"v": 2})["_id"])}):
            with pytest.raises(pymongo.errors.DuplicateKeyError):
                items.insert_one({**duplicate, "model": "x", "key": "y"})
        numbers = client[mongo_database_name].numbers
        numbers.insert_one({"_id": 1})
        with pytest.raises(pymongo.errors.DuplicateKeyError):
            numbers.insert_one({"_id": 1.0})
