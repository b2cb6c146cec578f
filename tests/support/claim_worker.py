"""A claimer for the claim-race tests: rounds of overlapping batch claims on one job collection.

In-process (threads) call `claim_rounds`; as an OS process:

    python -m tests.support.claim_worker URL DATABASE COLLECTION WORKER N_JOBS ROUNDS START_AT

waits until the wall clock reaches START_AT (so every process races at once), then prints a JSON
object: {"requested": [job ids asked for], "claimed": {dispatch id: [job ids got]}}.
"""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from crawlsched.store.job_claims import ClaimRequest
from crawlsched.store.jobs import MongoJobStore

BATCHES_PER_ROUND = 3
BATCH_SIZE = 6


def claim_rounds(jobs: MongoJobStore, worker: str, n_jobs: int, rounds: int) -> dict[str, Any]:
    rng = random.Random(worker)
    requested: set[int] = set()
    claimed: dict[str, list[int]] = {}
    deadline = datetime.now(UTC) + timedelta(minutes=10)
    for round_no in range(rounds):
        requests = []
        for k in range(BATCHES_PER_ROUND):
            ids = rng.sample(range(n_jobs), BATCH_SIZE)
            requested.update(ids)
            requests.append(ClaimRequest(f"{worker}.{round_no}.{k}", ids))
        claimed.update(jobs.claim(requests, run_id=f"run-{worker}", lease_deadline=deadline))
    return {"requested": sorted(requested), "claimed": claimed}


def main(argv: list[str]) -> int:
    from crawlsched.store.client import open_database

    url, database, collection, worker, n_jobs, rounds, start_at = argv
    db = open_database(url, database)
    jobs = MongoJobStore(db, collection)
    time.sleep(max(0.0, float(start_at) - time.time()))
    result = claim_rounds(jobs, worker, int(n_jobs), int(rounds))
    db.raw.client.close()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
