"""The standalone's journal: any sequence of writes to the embedded store, journaled and
replayed onto the snapshot it follows, gives the store the writes made — document for
document in the store's order, byte for byte, indexes included, whatever `now` and the
commands were. A journal cut anywhere gives the store as it was after some whole write, and
a damaged record stops the replay there, keeping what came before."""

from __future__ import annotations

import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.standalone.datadir import DataDir
from crawlsched.standalone.journal import journal_numbers, journal_path
from crawlsched.standalone.journal_format import MAGIC
from crawlsched.store.client import drop_embedded, open_database, record_writes
from crawlsched.store.counting import CountingDatabase
from tests.support.store_writes import apply_write, store_state, writes

DB = "crawlsched"
examples = settings(deadline=None, max_examples=80)


@contextmanager
def journaled_store() -> Iterator[tuple[CountingDatabase, DataDir]]:
    """A fresh embedded store whose writes are journaled in a fresh data directory."""
    url = f"mongomock://journal-{uuid.uuid4().hex}"
    root = Path(tempfile.mkdtemp(prefix="crawlsched-journal-"))
    db = open_database(url, DB)
    data = DataDir(root, DB)
    try:
        yield db, data
    finally:
        data.close_journal(db)
        drop_embedded(url)
        shutil.rmtree(root, ignore_errors=True)


def loaded(root: Path) -> tuple[dict, dict]:
    """What a start on the data directory `root` gives: the store's state, and the load's."""
    url = f"mongomock://journal-load-{uuid.uuid4().hex}"
    try:
        db = open_database(url, DB)
        load = DataDir(root, DB).load_into(db)
        return store_state(db), load
    finally:
        drop_embedded(url)


def last_journal(data: DataDir) -> Path:
    return journal_path(data.journal_dir, journal_numbers(data.journal_dir)[-1])


@given(before=st.lists(writes, max_size=8), after=st.lists(writes, max_size=25))
@examples
def test_a_journal_replayed_onto_its_snapshot_gives_the_store_its_writes_made(before, after):
    with journaled_store() as (db, data):
        # Given a store with some data, snapshotted when its journal starts
        for write in before:
            apply_write(db, write)
        data.start_journal(db)
        # When any writes follow, and the server dies (nothing but the journal after them)
        for write in after:
            apply_write(db, write)
        data.journal.sync()
        # Then a start on the data directory has exactly what the store had
        state, load = loaded(data.root)
        assert state == store_state(db)
        assert load["journal"]["stopped"] is None


@given(steps=st.lists(st.one_of(writes, st.just("snapshot")), max_size=30))
@examples
def test_snapshots_between_writes_cut_the_journal_where_they_hold_it(steps):
    with journaled_store() as (db, data):
        data.start_journal(db)
        for step in steps:
            if step == "snapshot":
                data.snapshot(db)
            else:
                apply_write(db, step)
        data.journal.sync()
        assert loaded(data.root)[0] == store_state(db)
        # Files the current snapshot holds are gone: the journal is bounded by the snapshots.
        assert journal_numbers(data.journal_dir) == [data.journal.number]


@given(before=st.lists(writes, max_size=10), after=st.lists(writes, max_size=10))
@examples
def test_a_snapshot_that_never_became_current_leaves_its_journal_to_replay(before, after):
    with journaled_store() as (db, data):
        data.start_journal(db)
        for write in before:
            apply_write(db, write)
        # When a snapshot cuts the journal but the server dies before it is made current
        switch, data._switch = data._switch, _die
        with pytest.raises(SystemExit):
            data.snapshot(db)
        data._switch = switch
        for write in after:
            apply_write(db, write)
        data.journal.sync()
        # Then the start loads the older snapshot and replays both journal files onto it
        state, load = loaded(data.root)
        assert state == store_state(db)
        assert load["journal"]["files"] == 2


def _die(folder: Path) -> None:
    raise SystemExit("killed before the switch")


def test_a_torn_journal_file_with_files_after_it_stops_the_replay_there():
    with journaled_store() as (db, data):
        data.start_journal(db)
        first = last_journal(data)
        for doc_id in (1, 2, 3):
            db.jobs.insert_one({"_id": doc_id})
        data._switch = _die  # the snapshot cuts the journal, then the server dies
        with pytest.raises(SystemExit):
            data.snapshot(db)
        db.jobs.insert_one({"_id": 4})
        data.journal.sync()
        # When the first file lost the end of its last record (a power loss), the records
        # after it were written on a store that held it: none of them can be applied
        first.write_bytes(first.read_bytes()[:-3])
        state, load = loaded(data.root)
        assert state["jobs"][0].count(b"_id") == 2
        assert load["journal"]["records"] == 2
        assert "torn" in load["journal"]["stopped"]


@given(ops=st.lists(writes, min_size=1, max_size=20), cut=st.floats(0, 1, exclude_max=False))
@examples
def test_a_journal_cut_anywhere_gives_the_store_after_its_last_whole_write(ops, cut):
    with journaled_store() as (db, data):
        data.start_journal(db)
        path = last_journal(data)
        # (journal size, store state) after each write
        after = [(path.stat().st_size, store_state(db))]
        for write in ops:
            apply_write(db, write)
            after.append((path.stat().st_size, store_state(db)))
        # When the file is cut at any byte, as a crash mid-write leaves it
        size = after[-1][0]
        keep = len(MAGIC) + int(cut * (size - len(MAGIC)))
        path.write_bytes(path.read_bytes()[:keep])
        # Then the start has the store after the last write whose record is whole
        expected = [state for end, state in after if end <= keep][-1]
        state, load = loaded(data.root)
        assert state == expected
        assert load["journal"]["stopped"] is None  # a torn end is no reason to stop
        assert load["journal"]["torn_tail"] == (keep not in [end for end, _ in after])


@given(ops=st.lists(writes, min_size=2, max_size=20), which=st.integers(0), offset=st.integers(0))
@examples
def test_a_damaged_record_stops_the_replay_keeping_what_came_before(ops, which, offset):
    with journaled_store() as (db, data):
        data.start_journal(db)
        path = last_journal(data)
        after = [(path.stat().st_size, store_state(db))]
        for write in ops:
            apply_write(db, write)
            if path.stat().st_size > after[-1][0]:  # it wrote a record
                after.append((path.stat().st_size, store_state(db)))
        if len(after) < 3:
            return  # fewer than two records: nothing to damage in the middle
        # When a byte of any record but the last is damaged
        record = which % (len(after) - 2)
        start, end = after[record][0], after[record + 1][0]
        damaged = bytearray(path.read_bytes())
        damaged[start + offset % (end - start)] ^= 0x5A
        path.write_bytes(bytes(damaged))
        # Then the start keeps the records before it, and says it stopped
        state, load = loaded(data.root)
        assert state == after[record][1]
        assert load["journal"]["records"] == record
        assert load["journal"]["stopped"]


def test_a_journal_of_concurrent_writers_holds_them_in_the_order_applied():
    # Given threads racing on the same documents with compare-and-set and counters
    with journaled_store() as (db, data):
        data.start_journal(db)
        db.jobs.insert_many([{"_id": i, "n": 0, "owner": None} for i in range(4)])

        def work(me: int) -> None:
            for round_ in range(200):
                doc_id = round_ % 4
                db.jobs.update_one({"_id": doc_id}, {"$inc": {"n": 1}, "$set": {"by": me}})
                db.jobs.update_one({"_id": doc_id, "owner": None}, {"$set": {"owner": me}})
                db.jobs.update_one({"_id": doc_id, "owner": me}, {"$set": {"owner": None}})

        threads = [threading.Thread(target=work, args=(me,)) for me in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        data.journal.sync()
        # Then the replay ends where the store did: every last write is the last replayed
        assert loaded(data.root)[0] == store_state(db)
        assert db.jobs.find_one({"_id": 0})["n"] == 200  # 50 rounds on each document, 4 threads


def test_a_snapshot_taken_while_threads_write_cuts_the_journal_at_one_moment():
    # Given writers that never pause, and snapshots taken meanwhile
    with journaled_store() as (db, data):
        data.start_journal(db)
        done = threading.Event()

        def write(me: int) -> None:
            n = 0
            while not done.is_set():  # each write a new document: a lost one stays lost
                db.jobs.insert_one({"_id": f"{me}-{n}"})
                db.runs.update_one({"_id": n % 20}, {"$inc": {"n": 1}, "$set": {"by": me}}, True)
                n += 1

        threads = [threading.Thread(target=write, args=(me,)) for me in range(3)]
        for thread in threads:
            thread.start()
        try:
            for _ in range(5):
                data.snapshot(db)
        finally:
            done.set()
            for thread in threads:
                thread.join()
        data.journal.sync()
        # Then no write falls between a snapshot and the journal after it
        assert loaded(data.root)[0] == store_state(db)


def test_writes_after_recording_stops_are_not_journaled():
    with journaled_store() as (db, data):
        data.start_journal(db)
        db.jobs.insert_one({"_id": 1})
        record_writes(db, None)
        db.jobs.insert_one({"_id": 2})
        data.journal.sync()
        state = loaded(data.root)[0]
        assert state["jobs"][0].count(b"_id") == 1


def test_only_the_embedded_store_records_writes():
    db = CountingDatabase(object(), counter=None)  # a real server's: no store lock
    with pytest.raises(ValueError, match="embedded"):
        record_writes(db, None)


@pytest.mark.parametrize(
    "bulk",
    [
        pytest.param([("set", 1, "a"), ("delete", 1, None), ("insert", 1, "b")], id="put-del-put"),
        pytest.param([("delete", 0, None), ("insert", 0, "c")], id="del-put: goes last"),
        pytest.param([("insert", 5, "x"), ("delete", 5, None)], id="put-del: never there"),
        pytest.param([("set", 0, "y"), ("set", 1, "z"), ("set", 0, "w")], id="put-put-put"),
    ],
)
def test_one_write_that_touches_a_document_twice_replays_as_it_ended(bulk):
    with journaled_store() as (db, data):
        db.jobs.insert_many([{"_id": i, "v": i} for i in range(3)])
        data.start_journal(db)
        apply_write(db, ("bulk", "jobs", None, bulk))
        data.journal.sync()
        assert loaded(data.root)[0] == store_state(db)


def test_a_stop_is_clean_only_if_nothing_was_written_after_its_last_snapshot():
    with journaled_store() as (db, data):
        data.start_journal(db)
        db.jobs.insert_one({"_id": 1})
        data.snapshot(db, messages=[("crawl", b"message")], clean=True)
        assert loaded(data.root)[1]["clean"] is True
        # A write after it: the messages saved with it may no longer be all there is
        db.jobs.insert_one({"_id": 2})
        data.journal.sync()
        assert loaded(data.root)[1]["clean"] is False
