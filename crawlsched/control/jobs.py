"""Jobs: counts per collection and state, add one target's jobs, find, show and remove jobs,
and the jobs set aside or waiting on an operator."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from crawlsched.catalog import JOB_COLLECTIONS, STATE_NAMES
from crawlsched.control.pages import page_of, sliced
from crawlsched.encoding import plain
from crawlsched.flow import job_ops
from crawlsched.planning.problems import diagnose
from crawlsched.runtime import Runtime


def counts(rt: Runtime) -> dict[str, Any]:
    """Per job collection, its jobs by state name and in all."""
    rows = []
    for collection in JOB_COLLECTIONS:
        by_state = rt.jobs(collection).summary()
        named = {STATE_NAMES.get(int(k), k) if k.isdigit() else k: n for k, n in by_state.items()}
        rows.append({"collection": collection, **named, "total": sum(by_state.values())})
    return {"items": rows}


def add(rt: Runtime, **fields: Any) -> dict[str, Any]:
    """Schedule the tasks of one profile or website (duplicates are skipped, not doubled)."""
    if isinstance(fields.get("start_at"), datetime):
        fields["start_at"] = fields["start_at"].isoformat()
    added = job_ops.add_target(rt, fields)
    return plain(
        {
            "collection": added.collection,
            "media": added.media["media_name"],
            "media_enabled": added.media.get("enabled") is not False,
            "inserted": added.inserted,
            "skipped": len(added.skipped),
            "jobs": [job_ops.public_job(added.collection, d) for d in added.stored],
            "disabled_tasks": added.disabled_tasks,
        }
    )


def page(
    rt: Runtime,
    collection: str,
    limit: int = 100,
    offset: int = 0,
    state: str | None = None,
    task: str | None = None,
    target: str | None = None,
    ids: list[str] | None = None,
) -> dict[str, Any]:
    """Jobs of a collection (users' first, then discovered pages), and how many in all."""
    rows = job_ops.find_jobs(rt, collection, state, task, target, ids, limit + 1, offset)
    total = job_ops.count_jobs(rt, collection, state, task, target, ids)
    return page_of(rows, limit, offset, total)


def get(rt: Runtime, collection: str, job_id: str) -> dict[str, Any]:
    return plain(job_ops.get_job(rt, collection, job_id))


def remove(rt: Runtime, collection: str, job_id: str) -> dict[str, Any]:
    """Delete a job no crawl holds; the job as it was."""
    return plain(job_ops.remove_job(rt, collection, job_id))


def _problem_rows(rt: Runtime, now: datetime) -> Iterator[dict[str, Any]]:
    for collection in JOB_COLLECTIONS:
        store = rt.jobs(collection)
        for doc in store.problems():
            problem = doc.get("problem")
            reason = problem.get("reason") if isinstance(problem, dict) else str(problem)
            yield {
                "collection": collection,
                "job_id": str(doc["_id"]),
                "target": doc.get("target"),
                "task": doc.get("task"),
                "reason": reason,
                "status": "set aside",
            }
        for row, found in ((row, diagnose(row)) for row in store.audit(now)):
            if found.set_aside:
                continue
            yield {
                "collection": collection,
                "job_id": str(found.job_id),
                "target": row.get("target"),
                "task": row.get("task"),
                "reason": found.reason,
                "status": "waiting",
            }


def problems(rt: Runtime, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    """Jobs set aside (fix them, then retry) and jobs waiting on an operator (a media or task
    switched off)."""
    return sliced(list(_problem_rows(rt, rt.now())), limit, offset)


def retry_problems(rt: Runtime) -> dict[str, Any]:
    """Clear the problem flag of set-aside jobs: the next sweep audits them again."""
    return {"cleared": {c: rt.jobs(c).clear_problems() for c in JOB_COLLECTIONS}}
