"""The store as a whole: counts, the activity feed, what a sweep would do (doctor), the crawl
drivers, reference data loaded (init-db), and what the crawls stored (results)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from crawlsched.catalog import JOB_COLLECTIONS, MODEL_COLLECTIONS, JobState
from crawlsched.control.pages import page_of
from crawlsched.control.writes import unanswered_writes
from crawlsched.encoding import plain
from crawlsched.errors import BadJobDocument
from crawlsched.flow import views
from crawlsched.ids import decode_id
from crawlsched.runtime import Runtime


def stats(rt: Runtime) -> dict[str, Any]:
    return plain(views.gather_stats(rt))


def activity(
    rt: Runtime, limit: int = 100, offset: int = 0, run_id: str | None = None
) -> dict[str, Any]:
    """Run, schedule, account, node and host events, newest first."""
    return page_of(views.activity(rt, run_id, limit + 1, offset), limit, offset)


def results(
    rt: Runtime,
    model: str,
    limit: int = 100,
    offset: int = 0,
    run_id: str | None = None,
    job_id: str | None = None,
) -> dict[str, Any]:
    """Stored documents of a data model, newest first (of one run or one job)."""
    if model not in MODEL_COLLECTIONS:
        raise ValueError(f"unknown model {model!r}; known: {', '.join(MODEL_COLLECTIONS)}")
    stored_job = None
    if job_id is not None:
        try:
            stored_job = decode_id(job_id)
        except ValueError:
            stored_job = job_id
    docs = rt.results.find(model, run_id=run_id, job_id=stored_job, limit=limit + 1, skip=offset)
    for doc in docs:
        doc.pop("_id", None)
    return page_of(docs, limit, offset)


def doctor(rt: Runtime) -> dict[str, Any]:
    """Read-only, per job collection: the planner's own queries, their answers counted
    instead of acted on."""
    return {"items": plain([_examine(rt, collection) for collection in JOB_COLLECTIONS])}


def _examine(rt: Runtime, collection: str) -> dict[str, Any]:
    from crawlsched.planning.due import parse_due_job
    from crawlsched.planning.problems import diagnose
    from crawlsched.store.children import MARKER_FILTER
    from crawlsched.store.pipeline import due_filter

    now = rt.now()
    store = rt.jobs(collection)
    fields = rt.target_fields(collection)
    report: dict[str, Any] = {
        "collection": collection,
        "jobs": store.count({"$nor": [MARKER_FILTER]}),
        "pages_seen": store.pages_seen(),
        "due": store.count(due_filter(now)),
        "running": store.count({"state": int(JobState.RUNNING)}),
        "exhausted": store.count({"exhausted": True}),
        "already_set_aside": store.count({"problem": {"$ne": None}}),
        "plan": Counter(),
        "wait": Counter(),
        "set_aside": Counter(),
    }
    for problem in map(diagnose, store.audit(now)):
        report["set_aside" if problem.set_aside else "wait"][problem.reason] += 1
    for task in store.due_tasks(now):
        for category, rows in store.categorized(task, now, fields).items():
            for row in rows:
                try:
                    parse_due_job(row, fields)
                except BadJobDocument as e:
                    report["set_aside"][e.reason] += 1
                else:
                    report["plan"][f"{task} / {category.value}"] += 1
    return {k: dict(v) if isinstance(v, Counter) else v for k, v in report.items()}


def drivers(rt: Runtime) -> dict[str, Any]:
    """Crawl drivers this process's workers can run (built-ins and plug-ins)."""
    from crawlsched.drivers import registry

    registry.load_plugins(rt.settings.driver_modules)
    return {"items": [{"driver": name} for name in registry.known()]}


def init_db(rt: Runtime, reference: dict[str, Any] | None = None) -> dict[str, Any]:
    """Create every index, load the reference data (the given one, else the settings' file or
    the packaged one) and add the two default sweeps. Safe to repeat."""
    from pydantic import ValidationError

    from crawlsched.errors import ReferenceDataError
    from crawlsched.reference import ReferenceData, load_reference

    if reference is None:
        data = load_reference(rt.settings.reference_file)
    else:
        try:
            data = ReferenceData.model_validate(reference)
        except ValidationError as e:
            raise ReferenceDataError(f"invalid reference data:\n{e}") from None
    with unanswered_writes("init-db's writes", "init-db is safe to run again."):
        rt.create_indexes()
        loaded = rt.reference.load(data)
        added = rt.schedules.ensure_defaults(rt.now())
    return {**loaded, "sweeps_added": added}
