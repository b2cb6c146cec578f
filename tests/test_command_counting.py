"""Commands counted at the store boundary equal the commands pymongo puts on the wire."""

from datetime import timedelta

import pytest

from crawlsched.planning.due import Category
from crawlsched.planning.outcomes import after_success
from crawlsched.reference import load_reference
from crawlsched.store.counting import CommandCounter
from crawlsched.store.job_claims import ClaimRequest
from crawlsched.store.jobs import MongoJobStore
from crawlsched.store.reference import MongoReferenceStore
from tests.support.factories import MONGOECO, NOW, open_store

N_JOBS = 50


@pytest.fixture
def counted_store(request):
    request.param = MONGOECO
    counter = CommandCounter()
    for store in open_store(request, counter):
        counter.reset()  # the ping of open_database is housekeeping, but start from zero anyway
        yield store


def workload(db) -> None:
    MongoReferenceStore(db).load(load_reference())
    jobs = MongoJobStore(db, "profiles")
    inserted, skipped = jobs.insert_new(
        [
            {
                "target": f"user{i}",
                "task": "profile",
                "media_name": ("twitter", "instagram", "tiktok", "youtube")[i % 4],
                "media_name_id": 1 + i % 4,
                "state": 1,
                "enabled": True,
                "execution_date": NOW - timedelta(minutes=1),
                "human_validation": i % 3 == 0,
                "certitude": 0.5,
                "modified_at": NOW,
                "attempt_count": 0,
            }
            for i in range(N_JOBS)
        ]
    )
    assert (inserted, skipped) == (N_JOBS, [])
    categorized = jobs.categorized("profile", NOW)
    assert sum(len(rows) for rows in categorized.values()) == N_JOBS
    requests = [
        ClaimRequest(f"d-{category.value}", [row["_id"] for row in rows])
        for category, rows in categorized.items()
        if rows
    ]
    claimed = jobs.claim(requests, "run-1", NOW + timedelta(minutes=5))
    assert sum(map(len, claimed.values())) == N_JOBS
    dispatch_id = f"d-{Category.NEITHER.value}"
    updates = [after_success(job_id, 300, NOW) for job_id in claimed[dispatch_id]]
    assert jobs.record(dispatch_id, updates, NOW) == len(updates) > 0


@pytest.mark.multiprocess
def test_command_counting_boundary_total_equals_wire_total(counted_store):
    counter = counted_store.db.counter

    workload(counted_store.db)

    assert counter.boundary_total > 0
    assert counter.boundary_total == counter.wire_total, (
        f"boundary {dict(counter.boundary)} != wire {dict(counter.wire)}"
    )
