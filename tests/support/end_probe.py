"""Test instrumentation: at the moment a run ends, record what of it has not ended.

Loaded into a worker through CRAWLSCHED_DRIVER_MODULES (it has an empty DRIVERS table) or
imported by an in-process test. When CRAWLSCHED_TEST_END_PROBE names a file, every run end
event appends one JSON line there, written *before* the event is emitted: the run, the event,
and how many of its jobs were still running, never-tried children still pending, and batches
still waiting. A correct "done" has all three at zero.
"""

from __future__ import annotations

import json
import os
import threading

from crawlsched.catalog import JOB_COLLECTIONS, JobState
from crawlsched.flow import coordination

DRIVERS: dict = {}
END_EVENTS = ("RunFinished", "RunFailed", "RunIncomplete", "RunStopped")
_lock = threading.Lock()
_real_emit = getattr(coordination.emit, "_real", coordination.emit)


def not_ended(rt, run_id: str) -> dict[str, int]:
    running = pending = 0
    for collection in JOB_COLLECTIONS:
        jobs = rt.db[collection]
        running += jobs.count_documents({"run_id": run_id, "state": int(JobState.RUNNING)})
        pending += jobs.count_documents(
            {"scope_run": run_id, "state": int(JobState.PENDING), "last_outcome": None}
        )
    return {"running": running, "pending": pending, "waiting": len(rt.waiting.for_run(run_id))}


def _checked_emit(rt, event: str, **fields):
    path = os.environ.get("CRAWLSCHED_TEST_END_PROBE")
    if path and event in END_EVENTS:
        row = {"run_id": fields.get("run_id"), "event": event, **not_ended(rt, fields["run_id"])}
        with _lock, open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(row) + "\n")
    return _real_emit(rt, event, **fields)


_checked_emit._real = _real_emit  # type: ignore[attr-defined]
coordination.emit = _checked_emit


def read(path: str) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as lines:
            return [json.loads(line) for line in lines if line.strip()]
    except FileNotFoundError:
        return []
