"""Job claims: racing claimers never share a job; release, record and outcomes_of by dispatch."""

import json
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest

from crawlsched.planning.outcomes import (
    Outcome,
    RedoPolicy,
    RetryPolicy,
    after_failure,
    after_machinery_failure,
    after_success,
)
from crawlsched.store.job_claims import ClaimRequest
from crawlsched.store.jobs import MongoJobStore
from tests.support.claim_worker import claim_rounds
from tests.support.factories import NOW, open_store
from tests.support.mongo_server import REPO_ROOT

N_JOBS = 60
LEASE = NOW + timedelta(minutes=5)


def pending_job(job_id, attempt_count=0):
    return {
        "_id": job_id,
        "target": f"t{job_id}",
        "task": "profile",
        "media_name": "twitter",
        "media_name_id": 1,
        "state": 1,
        "enabled": True,
        "execution_date": NOW,
        "attempt_count": attempt_count,
    }


def assert_each_job_claimed_once(results, docs):
    """No job in two claimers' answers; the store agrees; every job asked for went to someone."""
    owner = {}
    for result in results:
        for dispatch_id, job_ids in result["claimed"].items():
            for job_id in job_ids:
                assert job_id not in owner, f"job {job_id}: {owner.get(job_id)} and {dispatch_id}"
                owner[job_id] = dispatch_id
    requested = set().union(*(r["requested"] for r in results))
    assert set(owner) == requested
    assert sum(len(ids) for r in results for ids in r["claimed"].values()) == len(owner)
    for doc in docs:
        if doc["_id"] in owner:
            assert (doc["state"], doc["dispatch_id"]) == (2, owner[doc["_id"]])
        else:
            assert doc["state"] == 1 and "dispatch_id" not in doc
    return owner


@pytest.fixture
def embedded_store(request):
    request.param = "embedded"
    yield from open_store(request)


@pytest.fixture
def mongoeco_store(request):
    request.param = "mongoeco"
    yield from open_store(request)


def test_claims_by_racing_threads_never_share_a_job(embedded_store):
    # Given 60 pending jobs and 8 threads each claiming overlapping random batches at once
    embedded_store.db.profiles.insert_many([pending_job(i) for i in range(N_JOBS)])
    jobs = MongoJobStore(embedded_store.db, "profiles")
    barrier = threading.Barrier(8)
    results, errors = [], []

    def claimer(worker):
        try:
            barrier.wait(timeout=10)
            results.append(claim_rounds(jobs, worker, N_JOBS, rounds=8))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=claimer, args=(f"w{n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    # Then every job asked for was claimed by exactly one dispatch, and the others wait
    assert not errors
    assert len(results) == 8
    owner = assert_each_job_claimed_once(results, embedded_store.db.profiles.find())
    assert len({d.split(".")[0] for d in owner.values()}) > 1  # it really was a race


@pytest.mark.multiprocess
def test_claims_by_racing_processes_never_share_a_job(mongoeco_store):
    # Given 60 pending jobs on the shared server and 4 claimer processes started together
    mongoeco_store.db.profiles.insert_many([pending_job(i) for i in range(N_JOBS)])
    start_at = time.time() + 3
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.claim_worker",
                mongoeco_store.url,
                mongoeco_store.db_name,
                "profiles",
                f"p{n}",
                str(N_JOBS),
                "6",
                str(start_at),
            ],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    results = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
        results.append(json.loads(stdout))

    # Then no job was claimed by two dispatches, and none was lost
    assert_each_job_claimed_once(results, mongoeco_store.db.profiles.find())


def test_claims_release_returns_jobs_pending_with_their_attempt_count(store):
    # Given three jobs claimed by one dispatch, one of them already tried twice
    store.db.profiles.insert_many([pending_job(1), pending_job(2, attempt_count=2), pending_job(3)])
    jobs = MongoJobStore(store.db, "profiles")
    assert jobs.claim([ClaimRequest("d1", [1, 2])], "run-1", LEASE) == {"d1": [1, 2]}

    # When the dispatch is starved and released
    assert jobs.release("d1") == 2
    assert jobs.release("d1") == 0

    # Then both are pending again, free to claim, with their attempts as they were
    docs = {d["_id"]: d for d in store.db.profiles.find()}
    for job_id, attempts in ((1, 0), (2, 2)):
        assert docs[job_id]["state"] == 1
        assert docs[job_id]["attempt_count"] == attempts
        assert "dispatch_id" not in docs[job_id] and "lease_deadline" not in docs[job_id]
        assert (docs[job_id]["last_dispatch_id"], docs[job_id]["last_outcome"]) == (
            "d1",
            Outcome.STARVED,
        )
    assert docs[3] == pending_job(3)
    assert jobs.claim([ClaimRequest("d2", [1, 2, 3])], "run-1", LEASE) == {"d2": [1, 2, 3]}


def test_claims_record_with_a_stale_dispatch_id_changes_nothing(store):
    # Given job 1 claimed by d1, released, and claimed again by d2
    store.db.profiles.insert_many([pending_job(1)])
    jobs = MongoJobStore(store.db, "profiles")
    jobs.claim([ClaimRequest("d1", [1])], "run-1", LEASE)
    jobs.release("d1")
    jobs.claim([ClaimRequest("d2", [1])], "run-2", LEASE)
    before = store.db.profiles.find_one({"_id": 1})

    # When d1's late report arrives
    late = after_failure(1, 0, NOW, RetryPolicy(), "boom")
    assert jobs.record("d1", [late], NOW) == 0

    # Then the job is untouched, and d2's own report still lands
    assert store.db.profiles.find_one({"_id": 1}) == before
    assert jobs.record("d2", [after_success(1, 60, NOW)], NOW) == 1
    after = store.db.profiles.find_one({"_id": 1})
    assert (after["state"], after["last_dispatch_id"], after["last_outcome"]) == (
        1,
        "d2",
        Outcome.SUCCEEDED,
    )
    assert "dispatch_id" not in after
    assert after["execution_date"] == NOW + timedelta(seconds=60)


def test_claims_outcomes_of_counts_only_the_labels_asked_for(store):
    # Given a dispatch of five jobs: two succeeded, two failed (one for the last time), one expired
    store.db.profiles.insert_many([pending_job(i) for i in range(1, 7)])
    jobs = MongoJobStore(store.db, "profiles")
    jobs.claim([ClaimRequest("d1", [1, 2, 3, 4, 5]), ClaimRequest("d2", [6])], "run-1", LEASE)
    policy = RetryPolicy(max_attempts=2)
    updates = [
        after_success(1, 60, NOW),
        after_success(2, None, NOW),
        after_failure(3, 0, NOW, policy, "boom"),
        after_failure(4, 1, NOW, policy, "boom"),
        after_machinery_failure(5, "run-1", 0, 2, NOW, RedoPolicy(tries_per_run=3), "late"),
    ]
    assert jobs.record("d1", updates, NOW) == 5
    jobs.record("d2", [after_success(6, 60, NOW)], NOW)

    crawl = [Outcome.SUCCEEDED, Outcome.FAILED, Outcome.EXHAUSTED]
    assert jobs.outcomes_of("d1", crawl) == {"succeeded": 2, "failed": 1, "exhausted": 1}
    assert jobs.outcomes_of("d1", [Outcome.EXPIRED]) == {"expired": 1}
    assert jobs.outcomes_of("d1", [Outcome.STARVED]) == {}
    assert jobs.outcomes_of("d2", crawl) == {"succeeded": 1}
    assert jobs.outcomes_of("unknown", crawl) == {}


def test_claims_queued_at_least_counts_the_run_s_batches_that_have_not_begun(store):
    # Given six jobs of a run: three in a batch open to take-over, two in one that needs an
    # account (never open), one in an open batch that has begun; and one job of another task
    docs = [pending_job(i) for i in range(1, 7)] + [{**pending_job(7), "task": "friend"}]
    store.db.profiles.insert_many(docs)
    jobs = MongoJobStore(store.db, "profiles")
    jobs.create_indexes()  # the count's own (partial) index among them
    requests = [
        ClaimRequest("open", [1, 2, 3], open_to_take_over=True),
        ClaimRequest("login", [4, 5]),
        ClaimRequest("begun", [6], open_to_take_over=True),
        ClaimRequest("other-task", [7], open_to_take_over=True),
    ]
    assert len(jobs.claim(requests, "run-1", LEASE)) == 4
    jobs.begin("begun", [6])
    # Then only the three queued jobs of the run, task and media count, the take-over's look
    # sees the same ones, and a query by run alone still finds every job of the run
    assert jobs.queued_at_least("run-1", "profile", "twitter", 3)
    seen = jobs.open_to_take_over("run-1", "profile", "twitter", "none", 10)
    assert sorted(doc["_id"] for doc in seen) == [1, 2, 3]
    assert jobs.count_claimed_for_run("run-1") == 7
    assert not jobs.queued_at_least("run-1", "profile", "twitter", 4)
    assert not jobs.queued_at_least("run-2", "profile", "twitter", 1)
    assert not jobs.queued_at_least("run-1", "profile", "facebook", 1)
    # And a batch that begins takes its jobs out of the count
    jobs.begin("open", [1, 2, 3])
    assert not jobs.queued_at_least("run-1", "profile", "twitter", 1)


def test_two_copies_of_a_batch_that_read_before_either_began_crawl_its_jobs_once(store):
    # Given a batch open to take-over, whose message was delivered twice at once
    store.db.profiles.insert_many([pending_job(i) for i in range(1, 4)])
    jobs = MongoJobStore(store.db, "profiles")
    jobs.claim([ClaimRequest("d1", [1, 2, 3], open_to_take_over=True)], "run-1", LEASE)
    # When both copies read the jobs before either begins them (the second copy's read
    # is held until the first copy has begun)
    first_read = jobs.load_claimed
    reads: list = []

    def read_then_let_the_other_copy_begin(dispatch_id, job_ids):
        found = first_read(dispatch_id, job_ids)
        if not reads:
            reads.append(found)
            first = MongoJobStore(store.db, "profiles")
            reads.append(first.load_and_begin(dispatch_id, job_ids))
        return found

    jobs.load_claimed = read_then_let_the_other_copy_begin
    second = jobs.load_and_begin("d1", [1, 2, 3])
    # Then the copy that began them crawls all three, and the other none of them
    assert sorted(doc["_id"] for doc in reads[1]) == [1, 2, 3]
    assert second == []
