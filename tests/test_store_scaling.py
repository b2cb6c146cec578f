"""The embedded store's cost per job stays flat: planning and claiming 20,000 due jobs costs
per job at most twice what 1,000 cost, measured in the same test (a ratio, not a deadline).

Cost is this thread's CPU time (the embedded store runs in the calling thread): other processes
loading the machine stretch wall time, and more so for the longer run, but not this.
"""

import time
import uuid
from collections import Counter

from benchmarks import _workload as workload
from crawlsched.flow.planning import plan_collection
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from crawlsched.store.client import drop_embedded


def plan_ms_per_job(n: int) -> float:
    url = f"mongomock://scaling-{uuid.uuid4().hex}"
    try:
        rt = Runtime(Settings(mongo_url=url, default_batch_limit=workload.BATCH_LIMIT))
        reference = workload.reference()
        now = workload.utc_now()
        rt.create_indexes()
        rt.reference.load(reference)
        rt.db["profiles"].raw.insert_many(workload.job_docs(n, reference, now))
        messages: list = []
        started = time.thread_time()
        plan_collection(rt, rt.jobs("profiles"), "run-1", now, messages.append, Counter())
        elapsed = time.thread_time() - started
        assert sum(len(m.job_ids) for m in messages) == n  # every job planned and claimed
        return elapsed * 1000 / n
    finally:
        drop_embedded(url)


def test_store_planning_cost_per_job_is_flat_from_1k_to_20k():
    small = sorted(plan_ms_per_job(1_000) for _ in range(3))[1]  # median of three
    large = plan_ms_per_job(20_000)
    assert large <= 2 * small, f"{large:.3f} ms/job at 20k vs {small:.3f} ms/job at 1k"
