"""Several jobs of a batch crawled at once (`crawl.lanes`, `CRAWLSCHED_CRAWL_LANES`).

Real crawl code on the embedded store and real lane threads; the driver is a plug-in of this
module that runs the test's script. Only a driver that says so (`jobs_at_once = True`), in a
batch with no account and no browser, gets lanes; everything a job finds stays its own, and a
hand-over, a stop or a failure is recorded as exactly as one job at a time records it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from crawlsched.catalog import MODEL_COLLECTIONS
from crawlsched.crawl.batch import crawl_batch
from crawlsched.demo.seed import demo_reference
from crawlsched.drivers.base import DriverError
from crawlsched.messages import BatchMessage, ReportMessage
from crawlsched.planning.frontier_rules import MIN_PART_PAGES
from crawlsched.resources.rules import AccountLimits
from crawlsched.runtime import Runtime
from tests.conftest import settings_for_tests
from tests.support.claimed import claimed_batch

RUN = "crawl-lanes@20240601T120000Z"
WAIT_S = 30  # a generous bound on waiting for other lanes; never reached when lanes work

SCRIPT: dict[str, Callable] = {}


class _Scripted:
    def crawl(self, job, context) -> None:
        index = int(job.target.split("-")[0].removeprefix("job"))
        SCRIPT["step"](index, job, context)


class AtOnce(_Scripted):
    jobs_at_once = True


class OneAtATime(_Scripted):
    pass


DRIVERS = {"lanes-at-once": AtOnce, "lanes-one-at-a-time": OneAtATime}


class InFlight:
    """How many jobs run at once, at most, and in which threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = 0
        self.threads: set[int] = set()

    def __enter__(self) -> InFlight:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.threads.add(threading.get_ident())
        return self

    def __exit__(self, *exc) -> None:
        with self.lock:
            self.now -= 1


@pytest.fixture
def rt(embedded_mongo_url):
    settings = settings_for_tests(
        mongo_url=embedded_mongo_url,
        broker_url="stub://",
        driver_modules=["tests.test_crawl_lanes"],
        crawl_lanes=4,
    )
    rt = Runtime(settings)
    rt.create_indexes()
    rt.reference.load(demo_reference("http://127.0.0.1:9"))
    # Pages found one level down are kept (the demo's twitter keeps none).
    rt.db.childs_socialmedia.update_one(
        {"media_name": "twitter"}, {"$set": {"max_depth": 1, "max_pages": 1000}}
    )
    rt.db.runs.insert_one({"_id": RUN, "state": "running"})
    yield rt
    SCRIPT.clear()


def _batch(rt, n: int, driver: str = "lanes-at-once", login: bool = False) -> BatchMessage:
    message = claimed_batch(rt, n, run_id=RUN, driver_class=driver, login=login, selenium=False)
    if login:
        from crawlsched.flow.admission import admit

        rt.inventory.add_account("twitter", "acct", "hunter2", AccountLimits(), rt.now())
        sent: list[BatchMessage] = []
        assert admit(rt, message, sent.append) == 1
        message = sent[0]
    return message


def _crawl(rt, message: BatchMessage) -> tuple[dict[str, int], list[ReportMessage]]:
    reports: list[ReportMessage] = []
    return crawl_batch(rt, message, report=reports.append), reports


def _jobs(rt, message: BatchMessage) -> dict[int, dict]:
    docs = rt.db.profiles.find({"batch": message_batch(rt, message)})
    return {int(d["target"].split("-")[0].removeprefix("job")): d for d in docs}


def message_batch(rt, message: BatchMessage) -> str:
    return rt.db.profiles.find_one({"_id": message.decoded_job_ids()[0]})["batch"]


def test_a_batch_crawls_as_many_jobs_at_once_as_it_has_lanes_each_finding_its_own(rt):
    # Given a batch of eight whose first four jobs each wait until all four run
    together = threading.Barrier(4, timeout=WAIT_S)
    flight = InFlight()

    def step(index, job, context):
        with flight:
            if index < 4:
                together.wait()  # breaks (and fails the job) unless four run at once
            context.save("profile", [{"key": job.target, "name": f"n{index}"}])
            context.discover(f"https://twitter.test/{job.target}/friend", task="friend")

    SCRIPT["step"] = step
    message = _batch(rt, 8)
    # When it is crawled with four lanes
    counts, reports = _crawl(rt, message)
    # Then four ran at once and never more, each job's result and page are its own
    assert counts == {"succeeded": 8}
    assert flight.most == 4
    jobs = _jobs(rt, message)
    for index, doc in jobs.items():
        (item,) = rt.db[MODEL_COLLECTIONS["profile"]].find({"key": doc["target"]})
        assert (item["job_id"], item["name"]) == (doc["_id"], f"n{index}")
    children = list(rt.db.profiles.find({"scope_run": RUN, "depth": 1}))
    assert sorted(c["parent_job"] for c in children) == sorted(d["_id"] for d in jobs.values())
    assert [r.dispatch_id for r in reports] == [message.dispatch_id]


@pytest.mark.parametrize(
    ("driver", "lanes", "login"),
    [("lanes-one-at-a-time", 4, False), ("lanes-at-once", 1, False), ("lanes-at-once", 4, True)],
    ids=["driver-does-not-say-so", "one-lane", "batch-with-an-account"],
)
def test_one_job_at_a_time_in_the_batch_s_own_thread_unless_driver_and_batch_allow(
    rt, driver, lanes, login
):
    rt.settings = rt.settings.model_copy(update={"crawl_lanes": lanes})
    flight = InFlight()

    def step(index, job, context):
        with flight:
            pass

    SCRIPT["step"] = step
    message = _batch(rt, 5, driver=driver, login=login)

    counts, _ = _crawl(rt, message)

    assert counts == {"succeeded": 5}
    assert (flight.most, flight.threads) == (1, {threading.get_ident()})


def test_a_job_failing_in_a_lane_fails_alone(rt):
    def step(index, job, context):
        if index == 2:
            raise DriverError("page gone")
        context.save("profile", [{"key": job.target}])

    SCRIPT["step"] = step
    message = _batch(rt, 6)

    counts, _ = _crawl(rt, message)

    jobs = _jobs(rt, message)
    assert counts["succeeded"] == 5 and sum(counts.values()) == 6
    assert "page gone" in jobs[2]["last_error"]
    assert {jobs[i]["last_outcome"] for i in jobs if i != 2} == {"succeeded"}


def test_a_hand_over_records_a_part_only_when_no_job_is_in_flight(rt):
    # Given parts handed over as soon as they may be, and lanes always busy
    rt.settings = rt.settings.model_copy(update={"discovery_flush_s": 1e-6})
    n = 4 * MIN_PART_PAGES

    def step(index, job, context):
        context.discover(f"https://twitter.test/{job.target}/friend", task="friend")

    SCRIPT["step"] = step
    message = _batch(rt, n)
    # When the batch is crawled
    counts, reports = _crawl(rt, message)
    # Then every job was recorded once, by the part it was crawled in: each page found names
    # as its finder the dispatch its parent was recorded under, and every part was reported
    jobs = _jobs(rt, message)
    assert len(reports) >= 2
    assert {d["last_outcome"] for d in jobs.values()} == {"succeeded"} and len(jobs) == n
    assert {d["last_dispatch_id"] for d in jobs.values()} == {r.dispatch_id for r in reports}
    assert all(d.get("dispatch_id") is None for d in jobs.values())
    parents = {d["_id"]: d for d in jobs.values()}
    children = list(rt.db.profiles.find({"scope_run": RUN, "depth": 1}))
    assert len(children) == n
    for child in children:
        assert child["found_by"] == parents[child["parent_job"]]["last_dispatch_id"]
    assert sum(counts.values()) < n  # the last part's


def test_a_stop_seen_while_lanes_run_lets_them_finish_and_gives_the_rest_back(rt):
    # Given a batch whose first job stops its run, the others in flight waiting for that
    rt.settings = rt.settings.model_copy(update={"stop_check_s": 1e-6})
    stopped = threading.Event()

    def step(index, job, context):
        if index == 0:
            rt.db.runs.update_one({"_id": RUN}, {"$set": {"stop_requested": True}})
            stopped.set()
        assert stopped.wait(WAIT_S)

    SCRIPT["step"] = step
    message = _batch(rt, 12)

    # When it is crawled with four lanes
    counts, _ = _crawl(rt, message)
    # Then the jobs in flight (the first and up to three more) finished and were recorded, no
    # other started, and the rest went back as stopped
    jobs = _jobs(rt, message)
    crawled = [i for i, d in jobs.items() if d["last_outcome"] == "succeeded"]
    assert 0 in crawled and len(crawled) <= 4
    assert counts == {"succeeded": len(crawled), "stopped": 12 - len(crawled)}
    assert all(d.get("dispatch_id") is None for d in jobs.values())
