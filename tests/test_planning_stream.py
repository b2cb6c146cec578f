"""Planning streams: no reply grows with the number of due jobs, and a sweep can cap its claims."""

import uuid
from collections import Counter

import pytest

from benchmarks import _workload as workload
from crawlsched.catalog import JobState
from crawlsched.flow.planning import plan_collection
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from crawlsched.store.client import drop_embedded
from crawlsched.store.counting import CommandCounter


def _runtime(url: str, db_name: str, counter: CommandCounter | None = None, **fields) -> Runtime:
    rt = Runtime(
        Settings(
            mongo_url=url, mongo_db=db_name, default_batch_limit=workload.BATCH_LIMIT, **fields
        ),
        counter=counter,
    )
    # Reference indexes only: the multi-process test server checks a unique index by scanning,
    # which would make loading thousands of jobs slow without changing what is measured here.
    rt.reference.create_indexes()
    rt.reference.load(workload.reference())
    return rt


def _plan(rt: Runtime, n: int) -> list:
    now = workload.utc_now()
    rt.db["profiles"].raw.insert_many(workload.job_docs(n, workload.reference(), now))
    messages: list = []
    stats: Counter = Counter()
    plan_collection(rt, rt.jobs("profiles"), f"run-{n}", now, messages.append, stats)
    return messages


@pytest.mark.multiprocess
def test_planning_largest_reply_does_not_grow_with_due_jobs(
    multiprocess_mongo_url, mongo_database_name, monkeypatch
):
    # Given cursor batches and claim bulks of 100 (so that both sizes below exceed them)
    from crawlsched.flow import planning
    from crawlsched.store import jobs

    monkeypatch.setattr(planning, "CLAIM_CHUNK_JOBS", 100)
    monkeypatch.setattr(jobs, "PLANNING_BATCH", 100)
    # And the same workload at two sizes on a real wire-protocol server
    largest = {}
    for n in (300, 900):
        counter = CommandCounter()
        name = f"{mongo_database_name}_{n}"
        # The test server answers slowly under load: a heartbeat past pymongo's 5 s default
        # cancels the operation in flight (a CI run saw it), so give it time instead.
        rt = _runtime(multiprocess_mongo_url, name, counter, connect_timeout_s=60)
        counter.measure_replies = True
        # When each is planned
        messages = _plan(rt, n)
        assert sum(len(m.job_ids) for m in messages) == n
        largest[n] = (counter.max_reply_bytes, counter.max_reply_command)
        rt.db.raw.client.drop_database(name)
    # Then the largest reply is bounded by the batch sizes, not by the number of jobs
    assert largest[900][0] <= 1.2 * largest[300][0], largest
    assert largest[900][0] < 100_000


def test_planning_cap_claims_at_most_the_cap_and_leaves_the_rest_due():
    url = f"mongomock://cap-{uuid.uuid4().hex}"
    try:
        rt = _runtime(url, "crawlsched", max_claim_per_sweep=250)
        messages = _plan(rt, 1000)
        claimed = sum(len(m.job_ids) for m in messages)
        assert 200 <= claimed <= 250
        summary = rt.jobs("profiles").summary()
        assert summary[str(int(JobState.RUNNING))] == claimed
        assert summary[str(int(JobState.PENDING))] == 1000 - claimed
    finally:
        drop_embedded(url)
