"""A leaser for the contention test: threads that lease and release accounts as fast as they can.

    python -m tests.support.lease_worker URL DATABASE KEY WORKER THREADS CYCLES START_AT

Each thread repeats: lease one twitter account; bump that account's occupancy counter in a
separate collection (a counter above the account's max_concurrent is an over-allocation); bump it
back down; release. Prints {"cycles": n, "over": n, "refused": n} as JSON.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from pymongo import ReturnDocument

from crawlsched.resources.backends.mongo import MongoLeaseBackend
from crawlsched.resources.pools import Need, ResourcePools
from crawlsched.resources.secrets import SecretBox
from crawlsched.runtime import utc_now
from crawlsched.store.client import open_database


def lease_cycles(db, key: str, worker: str, cycles: int) -> dict[str, int]:
    pools = ResourcePools(MongoLeaseBackend(db, SecretBox(key)), ttl_s=60)
    need = Need(login=True, selenium=False, media_name="twitter")
    capacity = {
        str(a["_id"]): a["max_concurrent"] for a in db.accounts.find({"media_name": "twitter"})
    }
    done = over = refused = 0
    while done < cycles:
        grant = pools.acquire(need, f"{worker}-{done}", utc_now())
        if grant.leases is None:
            refused += 1
            continue
        (lease,) = grant.leases
        holders = db.occupancy.find_one_and_update(
            {"_id": str(lease.resource_id)},
            {"$inc": {"n": 1}},
            upsert=True,
            return_document=ReturnDocument.AFTER,
        )["n"]
        over += holders > capacity[str(lease.resource_id)]
        db.occupancy.update_one({"_id": str(lease.resource_id)}, {"$inc": {"n": -1}})
        pools.release(grant.leases, utc_now())
        done += 1
    return {"cycles": done, "over": over, "refused": refused}


def main(argv: list[str]) -> int:
    url, database, key, worker, threads, cycles, start_at = argv
    db = open_database(url, database)
    time.sleep(max(0.0, float(start_at) - time.time()))
    results: list[dict[str, int]] = []

    def run(n: int) -> None:
        results.append(lease_cycles(db, key, f"{worker}.{n}", int(cycles)))

    pool = [threading.Thread(target=run, args=(n,)) for n in range(int(threads))]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    db.raw.client.close()
    print(json.dumps({k: sum(r[k] for r in results) for k in ("cycles", "over", "refused")}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
