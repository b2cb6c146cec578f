"""The multi-process MongoDB harness does what the process-level tests rely on."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import pymongo
import pytest
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
