"""After the standalone server died without a clean stop: what its lost messages held.

Its broker lived in its own process, so every message not yet processed died with it. What
those messages carried is re-driven here, on the next start, instead of after the timeouts
that cover a worker lost on a shared broker:
- batches that were running: their dispatch leases end now, so the first tick reclaims their
  jobs as `expired` (one failed attempt each, counted once) and reports them to their runs;
- resource leases: every holder is gone, so every lease is dropped;
- runs whose planning was cut off: planning is sent again (it repeats safely).
Batches waiting for a resource and discovered pages not yet planned need nothing: the
ticker's sweeps pick them up.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from crawlsched.catalog import JOB_COLLECTIONS, JobState
from crawlsched.resources.backends.mongo import POOL_COLLECTIONS
from crawlsched.runtime import Runtime
from crawlsched.store.runs import ENDED


def recover_lost_messages(
    rt: Runtime, send_plan: Callable[[str, datetime], None]
) -> dict[str, Any]:
    now = rt.now()
    ended = now - timedelta(microseconds=1)
    batches = sum(
        rt.db[c]
        .update_many({"state": int(JobState.RUNNING)}, {"$set": {"lease_deadline": ended}})
        .modified_count
        for c in JOB_COLLECTIONS
    )
    leases = sum(
        rt.db[c]
        .update_many(
            {"leases.0": {"$exists": True}}, {"$set": {"leases": []}, "$inc": {"version": 1}}
        )
        .modified_count
        for c in POOL_COLLECTIONS.values()
    )
    replanned = []
    for run in rt.db.runs.find(
        {"planning": True, "state": {"$nin": list(ENDED)}, "parent_id": None},
        {"schedule_id": 1, "fire_at": 1},
    ):
        if run.get("schedule_id") and run.get("fire_at"):
            send_plan(run["schedule_id"], run["fire_at"])
            replanned.append(run["_id"])
    return {"running_jobs_reclaimed": batches, "resources_freed": leases, "replanned": replanned}
