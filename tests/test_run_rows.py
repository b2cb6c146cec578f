"""`GET /v1/runs` reuses each run's encoded row while the run's revision is unchanged: the page
is byte for byte the page encoded whole, and a run changed after its row was kept shows the
change on the next page (every writer of runs sets a new revision)."""

from __future__ import annotations

import inspect
import re
from datetime import timedelta

import pydantic_core
import pymongo
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlsched.api import run_rows
from crawlsched.api.paging import page_of
from crawlsched.api.run_rows import EncodedRows, runs_page
from crawlsched.planning.run_names import child_run_id, run_id_for
from crawlsched.store.children import MongoChildStore
from crawlsched.store.runs import REVISION, MongoRunStore
from tests.support.api import ApiServer, seeded_runtime
from tests.support.factories import NOW, STORE_BACKENDS, open_store, utc_datetimes

FIRE_AT = NOW - timedelta(minutes=1)


@pytest.fixture(params=STORE_BACKENDS)
def store(request):
    yield from open_store(request)


@pytest.fixture
def runs(store):
    return MongoRunStore(store.db)


def uncached(runs: MongoRunStore, limit: int, offset: int, **query) -> bytes:
    """What the route answered before rows were kept: the page read and encoded whole."""
    return pydantic_core.to_json(page_of(runs.page(limit + 1, offset, **query), limit, offset))


def opened(runs: MongoRunStore, name: str = "sched-1", minutes: int = 1, planned: int = 3) -> str:
    fire_at = NOW - timedelta(minutes=minutes)
    run_id = run_id_for(name, fire_at)
    runs.open(run_id, name, fire_at, fire_at)
    runs.close_planning(run_id, planned, {"claimed": planned}, fire_at)
    return run_id


# -- the rows ---------------------------------------------------------------------------------


def test_encoded_rows_answer_only_for_the_revision_they_were_stored_at():
    rows = EncodedRows()
    rows.put("r1", 1, b"{}")
    assert rows.get("r1", 1) == b"{}"
    assert rows.get("r1", 2) is None
    assert rows.get("r2", 1) is None
    rows.put("r1", 2, b"[]")
    assert (rows.get("r1", 1), rows.get("r1", 2), len(rows)) == (None, b"[]", 1)


def test_encoded_rows_drop_the_oldest_stored_beyond_their_capacity():
    rows = EncodedRows(capacity=2)
    rows.put("a", 1, b"a")
    rows.put("b", 1, b"b")
    rows.put("a", 2, b"a2")  # stored again: now the newest
    rows.put("c", 1, b"c")
    assert (rows.get("a", 2), rows.get("b", 1), rows.get("c", 1)) == (b"a2", None, b"c")


def test_whole_pages_answer_only_for_their_mark_and_the_oldest_go_first():
    rows = EncodedRows()
    rows.put_page("p", ("store", 1), b"[1]")
    assert rows.page("p", ("store", 1)) == b"[1]"
    assert rows.page("p", ("store", 2)) is None  # written since
    assert rows.page("p", None) is None  # a store without marks
    for i in range(run_rows.PAGES):
        rows.put_page(i, ("store", 1), b"[]")
    assert rows.page("p", ("store", 1)) is None
    assert rows.page(run_rows.PAGES - 1, ("store", 1)) == b"[]"


def test_encoded_rows_refuse_a_capacity_below_one():
    with pytest.raises(ValueError, match="capacity"):
        EncodedRows(capacity=0)


# -- the page ---------------------------------------------------------------------------------

docs = st.fixed_dictionaries(
    {
        "schedule_id": st.sampled_from(["a", "b"]),
        "state": st.sampled_from(["planning", "running", "finished", "stopped"]),
        "planning": st.booleans(),
        "planned": st.integers(0, 3),
        "children": st.integers(0, 1),
        "counts": st.dictionaries(st.sampled_from(["succeeded", "failed"]), st.integers(0, 9)),
        "stages_ms": st.dictionaries(
            st.sampled_from(["plan", "crawl"]), st.floats(0, 1e6, allow_nan=False)
        ),
        "fire_at": utc_datetimes(),
        "created_at": utc_datetimes(),
        "timeline": st.just({"series": [1, 2]}),
        "reports": st.just(["d1:crawl"]),
    },
    optional={
        REVISION: st.integers(0, 2),  # none: a run written before revisions
        "finished_at": utc_datetimes(),
        "shortages": st.lists(
            st.fixed_dictionaries({"reason": st.text(max_size=3), "at": utc_datetimes()}),
            max_size=2,
        ),
    },
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(docs, max_size=12),
    limit=st.integers(1, 5),
    offset=st.integers(0, 4),
    query=st.fixed_dictionaries(
        {
            "state": st.sampled_from([None, "running", "finished"]),
            "schedule_id": st.sampled_from([None, "a"]),
            "empty": st.booleans(),
        }
    ),
)
def test_runs_page_is_byte_for_byte_the_page_encoded_whole(store, rows, limit, offset, query):
    db = store.db
    db.runs.delete_many({})
    if rows:
        db.runs.insert_many([dict(doc, _id=f"run-{i}") for i, doc in enumerate(rows)])
    runs = MongoRunStore(db)
    kept = EncodedRows()
    expected = uncached(runs, limit, offset, **query)
    assert runs_page(runs, kept, limit, offset, **query) == expected  # every row encoded
    assert runs_page(runs, kept, limit, offset, **query) == expected  # rows reused


def test_runs_page_shows_a_run_changed_after_its_row_was_kept(runs):
    older, newer = opened(runs, minutes=2), opened(runs, "sched-2")
    kept = EncodedRows()
    before = runs_page(runs, kept, 10, 0)
    assert len(kept) == 2

    runs.report(newer, "d1:crawl", {"succeeded": 2}, stages_ms={"crawl": 7.5})

    after = runs_page(runs, kept, 10, 0)
    assert after != before
    assert after == uncached(runs, 10, 0)
    assert b'"succeeded":2' in after
    assert older in after.decode() and newer in after.decode()


def test_runs_page_reads_the_page_whole_when_a_listed_run_went_before_its_row_was_read(runs):
    gone, kept_run = opened(runs, minutes=2), opened(runs, "sched-2")
    listed = runs.page_revisions

    def listed_then_deleted(*args, **kwargs):
        answer = listed(*args, **kwargs)
        runs._runs.delete_one({"_id": gone})
        return answer

    runs.page_revisions = listed_then_deleted
    page = runs_page(runs, EncodedRows(), 10, 0)
    assert gone not in page.decode() and kept_run in page.decode()
    assert page == uncached(runs, 10, 0)


# -- whole pages while no run is written ------------------------------------------------------


def _counting_reads(runs: MongoRunStore) -> list[int]:
    """Count the page reads `runs_page` makes (its listing of ids and revisions)."""
    reads = [0]
    listed = runs.page_revisions

    def counted(*args, **kwargs):
        reads[0] += 1
        return listed(*args, **kwargs)

    runs.page_revisions = counted
    return reads


def test_a_page_is_answered_again_without_a_read_until_a_run_is_written(runs, store):
    opened(runs, minutes=2), opened(runs, "sched-2")
    kept, reads = EncodedRows(), _counting_reads(runs)
    first = runs_page(runs, kept, 10, 0)
    again = runs_page(runs, kept, 10, 0)
    assert again == first == uncached(runs, 10, 0)
    # The embedded store marks its writes: the second page read nothing. A real server
    # cannot say cheaply whether runs were written: every page is read.
    assert reads[0] == (1 if store.is_embedded else 2)
    # A write to another collection leaves the page as it is
    store.db.jobs.insert_one({"_id": "j1"})
    runs_page(runs, kept, 10, 0)
    assert reads[0] == (1 if store.is_embedded else 3)
    # Any write of a run is read on the next page, and another query is a page of its own
    runs.report(opened(runs, "sched-3"), "d1:crawl", {"succeeded": 4})
    after = runs_page(runs, kept, 10, 0)
    assert after == uncached(runs, 10, 0) and b'"succeeded":4' in after
    assert runs_page(runs, kept, 1, 0) == uncached(runs, 1, 0)


def test_a_run_written_while_its_page_was_read_is_on_the_next_page(runs):
    opened(runs, minutes=3)
    listed = runs.page_revisions
    late = []

    def listed_then_written(*args, **kwargs):
        answer = listed(*args, **kwargs)
        late.append(opened(runs, "sched-late", minutes=1))  # after the listing: not on it
        return answer

    runs.page_revisions = listed_then_written
    kept = EncodedRows()
    first = runs_page(runs, kept, 10, 0)
    assert late[0] not in first.decode()
    runs.page_revisions = listed
    # The next page is read again and shows it, although no write came after that page
    assert late[0] in runs_page(runs, kept, 10, 0).decode()


def test_the_embedded_store_s_write_mark_moves_with_every_kind_of_write(store):
    db = store.db
    if not store.is_embedded:
        assert db.write_mark("runs") is None
        return
    marks = [db.write_mark("runs")]

    def moved() -> bool:
        marks.append(db.write_mark("runs"))
        return marks[-1] != marks[-2]

    assert not moved()  # nothing written
    db.runs.insert_one({"_id": "a", "n": 1})
    assert moved()
    db.runs.update_one({"_id": "a"}, {"$inc": {"n": 1}})
    assert moved()
    db.runs.bulk_write([pymongo.UpdateOne({"_id": "b"}, {"$set": {"n": 1}}, upsert=True)])
    assert moved()
    db.runs.find_one_and_update({"_id": "b"}, {"$set": {"n": 2}})
    assert moved()
    db.runs.delete_one({"_id": "a"})
    assert moved()
    list(db.runs.find({})), db.runs.count_documents({})
    assert not moved()  # reads
    db.jobs.insert_one({"_id": "j"})
    assert not moved()  # another collection
    db.runs.drop()
    db.runs.insert_one({"_id": "a"})
    assert moved()  # a new collection, whatever its count of writes


# -- every writer sets a new revision ---------------------------------------------------------

_WRITES = re.compile(r"\.(update_one|update_many|find_one_and_update|replace_one)\(")
WRITERS = sorted(
    name
    for name, method in vars(MongoRunStore).items()
    if callable(method) and name != "create_indexes" and _WRITES.search(inspect.getsource(method))
)


def _write_each(runs: MongoRunStore, store) -> dict[str, str]:
    """Call every writer of runs once, on a run it changes; the run each wrote."""
    now = NOW
    parent = opened(runs, "parent", minutes=5, planned=0)
    child = child_run_id(parent, 1)
    runs.open(child, "parent", FIRE_AT, now, parent_id=parent)
    runs.close_planning(child, 0, {}, now)
    ended = opened(runs, "ended", minutes=4, planned=1)
    runs.report(ended, "d0:crawl", {"failed": 1})
    runs.finish(ended, now)
    runs.announced(ended)
    paused = opened(runs, "paused", minutes=3)
    runs.set_paused(paused, now)
    fresh = run_id_for("fresh", FIRE_AT)
    running = opened(runs, "running", minutes=2)
    calls = {
        "open": lambda: runs.open(fresh, "fresh", FIRE_AT, now) and fresh,
        "close_planning": lambda: runs.close_planning(fresh, 1, {}, now) and fresh,
        "report": lambda: runs.report(running, "d1:crawl", {"succeeded": 1}) and running,
        "record_shortage": lambda: runs.record_shortage(running, "d1", 3, "accounts", now),
        "add_stage_time": lambda: runs.add_stage_time(running, "plan", 1.5),
        "child_ended": lambda: runs.child_ended(parent, child, {"succeeded": 1}) and parent,
        "finish": lambda: runs.finish(child, now) and child,
        "announced": lambda: runs.announced(child) or child,
        "request_stop": lambda: runs.request_stop(running, now, task="crawl") and running,
        "set_paused": lambda: runs.set_paused(running, now) and running,
        "clear_paused": lambda: runs.clear_paused(paused, now) and paused,
        "take_back": lambda: runs.take_back(ended, "retry:1", {"counts.failed": -1}, now) and ended,
    }
    assert sorted(calls) == WRITERS  # a new writer of runs must be added here
    written = {}
    for name, call in calls.items():
        target = {
            "record_shortage": running,
            "add_stage_time": running,
        }.get(name)
        before = {d["_id"]: d.get(REVISION) for d in runs._runs.find({}, {REVISION: 1})}
        answer = call()
        run_id = target or answer
        assert isinstance(run_id, str), f"{name} changed nothing"
        after = runs._runs.find_one({"_id": run_id}, {REVISION: 1})
        assert after[REVISION] is not None, name
        assert after[REVISION] != before.get(run_id), f"{name} kept the run's revision"
        written[name] = run_id
    return written


def test_every_writer_of_runs_sets_a_new_revision(runs, store):
    written = _write_each(runs, store)
    assert set(written) == set(WRITERS)


def test_a_page_after_each_writer_is_the_page_encoded_whole(runs, store):
    kept = EncodedRows()
    original = MongoRunStore.__dict__
    for name in WRITERS:
        method = original[name]

        def paged_after(*args, _method=method, **kwargs):
            answer = _method(runs, *args, **kwargs)
            assert runs_page(runs, kept, 20, 0) == uncached(runs, 20, 0)
            return answer

        setattr(runs, name, paged_after)
    runs_page(runs, kept, 20, 0)
    _write_each(runs, store)


def test_the_child_store_s_writes_of_runs_set_a_new_revision():
    # `pages_reserved` and `pages_by_seed` are fields of the run's row, written by the child
    # store: each of its updates of runs goes through `revised`.
    source = inspect.getsource(MongoChildStore)
    writes = re.findall(r"self\._runs\.(?:update_one|update_many|find_one_and_update)\(", source)
    assert writes and source.count("revised(") == len(writes)


def test_readers_that_answer_callers_leave_the_revision_out(runs):
    parent = opened(runs)
    child = child_run_id(parent, 1)
    runs.open(child, "sched-1", FIRE_AT, NOW, parent_id=parent)
    shown = [
        runs.get(parent),
        *runs.page(10),
        *runs.children_of(parent),
        *runs.unfinished(),
        runs.request_stop(parent, NOW),
    ]
    assert all(REVISION not in doc for doc in shown)
    assert REVISION.encode() not in runs_page(runs, EncodedRows(), 10, 0)


def test_runs_written_before_revisions_take_one_with_the_indexes(runs):
    runs._runs.insert_one({"_id": "old@20240101T000000Z", "created_at": NOW, "state": "finished"})
    runs.create_indexes()
    assert runs._runs.find_one({"_id": "old@20240101T000000Z"})[REVISION] is not None


# -- through the API ----------------------------------------------------------------------------


def test_get_runs_shows_a_report_applied_after_the_page_was_read(embedded_mongo_url):
    rt = seeded_runtime(embedded_mongo_url)
    run_id = opened(rt.runs)
    with ApiServer(rt) as api:
        first = api.reader.get("/v1/runs", params={"limit": 10})
        assert first.status_code == 200
        assert first.json()["items"][0]["counts"] == {}

        rt.runs.report(run_id, "d1:crawl", {"succeeded": 1})

        second = api.reader.get("/v1/runs", params={"limit": 10})
        assert second.json()["items"][0]["counts"] == {"succeeded": 1}
        assert second.content == uncached(rt.runs, 10, 0, empty=False)
