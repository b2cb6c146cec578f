"""Pool utilisation under scarcity, and the cost of a lease cycle.

(a) Scarcity, through the real actors on the real RabbitMQ (a vhost of its own, deleted after),
    one in-process worker, the embedded store: BATCHES login batches of JOBS jobs each, on
    ACCOUNTS twitter accounts; the driver (`slow`, a test plug-in) holds the lease HOLD_S per
    job. Ideal wall time = total lease-holding work ÷ capacity.
      starved_share   = jobs starved ÷ jobs planned            (target 0)
      wall_over_ideal = wall time ÷ ideal wall time            (target ≤ 1.15)
(b) Lease cycles: acquire + release through ResourcePools on the embedded store, vs a bare
    find_one_and_update + update_one pair on the same store, same run (target ≥ 0.5).

    .venv/bin/python benchmarks/bench_pools.py [--batches 24] [--jobs 5] [--hold 0.1]

Last line: JSON with starved_share, wall_over_ideal, lease_cycle_ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

# Messages on RabbitMQ are signed (the settings refuse it without a key).
BENCH_SIGNING_KEY = "bench-signing-key-" + "b" * 32

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ACCOUNTS = 3
ROUNDS = 5  # lease-cycle rounds of each kind, alternating


def scarcity(batches: int, jobs: int, hold_s: float) -> dict:
    os.environ["CRAWLSCHED_TEST_SLOW_DRIVER_S"] = str(hold_s)
    from dramatiq import Worker

    from crawlsched.brokers import setup_broker
    from crawlsched.catalog import JobState
    from crawlsched.demo.seed import demo_reference
    from crawlsched.planning.run_names import FINISHED
    from crawlsched.resources.rules import AccountLimits
    from crawlsched.resources.secrets import generate_key
    from crawlsched.runtime import get_runtime
    from crawlsched.settings import Settings
    from crawlsched.store.client import drop_embedded
    from tests.support.rabbit import TestVhost

    vhost = TestVhost().create()
    url = "mongomock://bench-pools"
    drop_embedded(url)
    try:
        settings = Settings(
            mongo_url=url,
            broker_url=vhost.url,
            message_signing_key=BENCH_SIGNING_KEY,
            secret_key=generate_key(),
            driver_modules=["tests.support.slow_driver"],
            log_level="WARNING",
            log_format="json",
        )
        broker = setup_broker(settings)
        import crawlsched.actors  # noqa: F401
        from crawlsched.actors import ticker

        rt = get_runtime()
        reference = demo_reference("http://127.0.0.1:9")
        # One batch per `jobs` jobs: the twitter profile task's batch_limit set to `jobs`.
        media = []
        for m in reference.media:
            update = {"driver_class": "slow"}
            if m.name == "twitter":
                tasks = {
                    name: t.model_copy(update={"batch_limit": jobs}) for name, t in m.tasks.items()
                }
                update["tasks"] = tasks
            media.append(m.model_copy(update=update))
        rt.create_indexes()
        rt.reference.load(reference.model_copy(update={"media": media}))
        rt.schedules.ensure_defaults(rt.now())
        for i in range(ACCOUNTS):
            rt.inventory.add_account("twitter", f"a{i}", "pw", AccountLimits(), rt.now())
        twitter = rt.reference.media_by_name("twitter")
        now = rt.now()
        rt.jobs("profiles").insert_new(
            [
                {
                    "target": f"u{i}",
                    "media_name": "twitter",
                    "media_name_id": twitter["_id"],
                    "task": "profile",
                    "state": int(JobState.PENDING),
                    "enabled": True,
                    "execution_date": now - timedelta(seconds=1),
                    "modified_at": now,
                    "attempt_count": 0,
                }
                for i in range(batches * jobs)
            ]
        )
        worker = Worker(broker, worker_threads=ACCOUNTS + 5)
        worker.start()
        try:
            broker.flush_all()
            rt.schedules.fire_now("sweep-profiles", rt.now())
            started = time.perf_counter()
            ticker.tick.send()
            while True:
                run = rt.db.runs.find_one({"schedule_id": "sweep-profiles"})
                if run and run["state"] == FINISHED:
                    break
                if time.perf_counter() - started > 600:
                    raise SystemExit("bench_pools: the run did not finish in 600 s")
                time.sleep(0.02)
            wall = time.perf_counter() - started
        finally:
            worker.stop()
            broker.close()
        ideal = batches * jobs * hold_s / ACCOUNTS
        planned = run["planned"]
        grants = sorted(row["granted_at"] for row in rt.assignments.for_run(run["_id"]))
        first_grant_s = (grants[0] - run["created_at"]).total_seconds()
        planning_s = (run["planned_at"] - run["created_at"]).total_seconds()
        return {
            "planned": planned,
            "starved": run["counts"].get("starved", 0),
            "starved_share": run["counts"].get("starved", 0) / planned,
            "wall_s": round(wall, 2),
            "ideal_s": round(ideal, 2),
            "wall_over_ideal": round(wall / ideal, 3),
            "planning_s": round(planning_s, 3),
            "first_grant_s": round(first_grant_s, 3),
            # Summed over batches: time in the crawl actor, and waiting for an account.
            "crawl_s_per_batch": round(run["stages_ms"].get("crawl", 0) / 1000 / batches, 3),
        }
    finally:
        drop_embedded(url)
        vhost.delete()


def lease_cycles(n: int) -> dict:
    from pymongo import ReturnDocument

    from crawlsched.resources.backends.mongo import MongoLeaseBackend
    from crawlsched.resources.inventory import MongoPoolInventory
    from crawlsched.resources.pools import Need, ResourcePools
    from crawlsched.resources.rules import AccountLimits
    from crawlsched.resources.secrets import SecretBox, generate_key
    from crawlsched.runtime import utc_now
    from crawlsched.store.client import drop_embedded, open_database

    url = "mongomock://bench-lease-cycles"
    drop_embedded(url)
    db = open_database(url, "crawlsched")
    secrets = SecretBox(generate_key())
    inventory = MongoPoolInventory(db, secrets)
    for i in range(4):
        inventory.add_account("twitter", f"a{i}", "pw", AccountLimits(), utc_now())
    pools = ResourcePools(MongoLeaseBackend(db, secrets), ttl_s=60)
    need = Need(True, False, "twitter")
    db.bare.insert_many([{"_id": i, "holder": None} for i in range(4)])

    def ours(rounds: int) -> float:
        started = time.perf_counter()
        for i in range(rounds):
            grant = pools.acquire(need, f"h{i}", utc_now())
            pools.release(grant.leases, utc_now())
        return rounds / (time.perf_counter() - started)

    def bare(rounds: int) -> float:
        started = time.perf_counter()
        for i in range(rounds):
            doc = db.bare.find_one_and_update(
                {"holder": None},
                {"$set": {"holder": f"h{i}"}},
                return_document=ReturnDocument.AFTER,
            )
            db.bare.update_one({"_id": doc["_id"], "holder": f"h{i}"}, {"$set": {"holder": None}})
        return rounds / (time.perf_counter() - started)

    # Alternating rounds, medians: a machine busy with something else slows both alike.
    ours_rates, bare_rates = [], []
    for _ in range(ROUNDS):
        ours_rates.append(ours(max(1, n // ROUNDS)))
        bare_rates.append(bare(max(1, n // ROUNDS)))
    ours_rate, bare_rate = statistics.median(ours_rates), statistics.median(bare_rates)
    drop_embedded(url)
    return {
        "lease_cycles_per_s": round(ours_rate),
        "bare_pair_per_s": round(bare_rate),
        "lease_cycle_ratio": round(ours_rate / bare_rate, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=24)
    parser.add_argument("--jobs", type=int, default=5)
    parser.add_argument("--hold", type=float, default=0.1)
    parser.add_argument("--cycles", type=int, default=2000)
    args = parser.parse_args()
    figures = {**scarcity(args.batches, args.jobs, args.hold), **lease_cycles(args.cycles)}
    for key, value in figures.items():
        print(f"{key:>20}  {value}")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
