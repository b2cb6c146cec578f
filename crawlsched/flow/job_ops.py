"""Job operations shared by the command line and the HTTP API: add one target's jobs, find
jobs, change a job's meta.

Jobs are named outside the store by their collection and encoded id (`oid:…`, `int:…`,
`str:…`, see `crawlsched.ids`), so a job id survives JSON unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import bson
import bson.errors

from crawlsched.catalog import JOB_COLLECTIONS, STATE_NAMES, TARGET_KINDS
from crawlsched.errors import BadJobInput, JobNotFound
from crawlsched.ids import decode_id, encode_id
from crawlsched.jobs_input import build_job_docs, job_input_from_row
from crawlsched.planning import change_rate
from crawlsched.planning.recrawl import ESTIMATE
from crawlsched.runtime import Runtime
from crawlsched.store.children import MARKER_FILTER

STATE_NUMBERS = {name: number for number, name in STATE_NAMES.items()}
# Job fields a caller may read; the rest (dispatch ids, lease deadlines) are the flow's own.
PUBLIC_FIELDS = (
    "media_name_id", "target", "task", "url", "state", "execution_date", "interval_s",
    "one_off", "human_validation", "certitude", "last_outcome", "last_error", "attempts",
    "depth", "scope_run", "meta", "updated_at", "max_depth", "max_pages", "pagination",
    "page_param",
)  # fmt: skip
META_MAX_KEYS = 50


@dataclass
class AddedJobs:
    media: dict[str, Any]
    collection: str
    docs: list[dict[str, Any]]
    inserted: int
    skipped: list[Any] = field(default_factory=list)
    disabled_tasks: list[str] = field(default_factory=list)
    stored: list[dict[str, Any]] = field(default_factory=list)


def media_and_tasks(rt: Runtime, name: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    row = rt.reference.media_by_name(name)
    if row is None:
        known = sorted(m["media_name"] for m in rt.reference.media())
        listed = ", ".join(known) or empty_store_hint(rt)
        raise BadJobInput(f"unknown media {name!r}; known media: {listed}")
    return row, rt.reference.tasks_of(row.get("media_name_id", row["_id"]))


def empty_store_hint(rt: Runtime) -> str:
    """What to do about a store with no reference data."""
    if rt.settings.mongo_url.startswith("mongomock://"):
        # `init-db` would not help: this command's embedded store ends with the command.
        return (
            "none: the embedded store lives only as long as one command; start "
            "`crawlsched standalone` and run commands beside it, or set CRAWLSCHED_MONGO_URL"
        )
    return "none (run `crawlsched init-db`)"


def add_target(rt: Runtime, fields: Mapping[str, Any]) -> AddedJobs:
    """Schedule the tasks of one profile or website (duplicates are skipped, not doubled)."""
    if fields.get("interval_s") is not None and fields.get("one_off"):
        raise BadJobInput("an interval and a one-off crawl exclude each other")
    given = {k: v for k, v in fields.items() if v is not None and v != []}
    job = job_input_from_row(given)
    media, task_rows = media_and_tasks(rt, job.media_name)
    docs = build_job_docs(job, media, set(task_rows), rt.now(), rt.allowed_networks)
    collection = TARGET_KINDS[job.kind].collection
    inserted, skipped = rt.jobs(collection).insert_new(docs)
    # What is stored now (with its _id), whether this call inserted it or it was there.
    stored = rt.jobs(collection).of_target(
        docs[0]["media_name_id"], docs[0]["target"], [d["task"] for d in docs]
    )
    disabled = [
        task_rows[d["task"]]["name"] for d in docs if task_rows[d["task"]].get("enabled") is False
    ]
    return AddedJobs(media, collection, docs, inserted, skipped, disabled, stored)


def public_job(collection: str, doc: Mapping[str, Any]) -> dict[str, Any]:
    """A job as callers see it: its encoded id, collection, state by name, public fields."""
    shown = {k: doc[k] for k in PUBLIC_FIELDS if k in doc}
    shown["state"] = STATE_NAMES.get(doc.get("state"), str(doc.get("state")))
    return {"job_id": encode_id(doc["_id"]), "collection": collection, **shown}


def _collection(collection: str) -> str:
    if collection not in JOB_COLLECTIONS:
        known = ", ".join(JOB_COLLECTIONS)
        raise BadJobInput(f"unknown job collection {collection!r}; known: {known}")
    return collection


def _job_id(job_id: str) -> Any:
    try:
        return decode_id(job_id)
    except ValueError as e:
        raise BadJobInput(str(e)) from None  # (it quotes the id)


def get_job(rt: Runtime, collection: str, job_id: str) -> dict[str, Any]:
    """One job as callers see it, with how often it is crawled again (`recrawl_view`)."""
    doc = rt.jobs(_collection(collection)).get(_job_id(job_id))
    if doc is None:
        raise JobNotFound(job_id, collection)
    return {**public_job(collection, doc), "recrawl": recrawl_view(rt, doc)}


def recrawl_view(rt: Runtime, doc: Mapping[str, Any]) -> dict[str, Any]:
    """A job's configured interval, the one it is crawled at now, and the evidence behind it:
    its media's policy, and what its crawls found (`planning.recrawl`). Values of the wrong
    type in the store (a job of the old system) read as absent."""
    media_id = doc.get("media_name_id")
    media = next(
        (m for m in rt.reference.media() if m.get("media_name_id", m["_id"]) == media_id), None
    )
    policy = rt.recrawl_policy(media)
    state = doc.get("recrawl")
    state = state if isinstance(state, Mapping) else {}
    configured = _number(doc.get("interval_s"))
    current = _number(state.get("interval_s")) if policy.adaptive else None
    last = state.get("last_items") or doc.get("last_items")
    last = last if isinstance(last, Mapping) else {}
    estimating = policy.adaptive and policy.method == ESTIMATE
    belief = state.get("rate_belief")
    return {
        "mode": policy.mode if configured else "once",
        "method": policy.method if policy.adaptive and configured else None,
        "estimated_change_every_s": (
            1 / change_rate.mean_rate(belief)
            if estimating and configured and change_rate.is_belief(belief)
            else None
        ),
        "configured_interval_s": configured,
        "current_interval_s": current or configured,
        "min_interval_s": policy.min_interval_s if policy.adaptive else None,
        "max_interval_s": policy.max_interval_s if policy.adaptive else None,
        "visits": int(_number(state.get("visits")) or 0),
        "changes": int(_number(state.get("changes")) or 0),
        "last_items": {str(k): int(n) for k, n in last.items() if _number(n) is not None},
        "updated_at": _moment(state.get("updated_at")),
        "next_at": _moment(doc.get("execution_date")),
    }


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return value if math.isfinite(value) else None


def _moment(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) else None


def find_jobs(
    rt: Runtime,
    collection: str,
    state: str | None = None,
    task: str | None = None,
    target: str | None = None,
    ids: list[str] | None = None,
    limit: int = 100,
    skip: int = 0,
) -> list[dict[str, Any]]:
    """Jobs of one collection, filtered: the jobs users added (and imported) in id order, then
    the pages runs discovered (a run's seed markers are no jobs)."""
    docs = rt.jobs(_collection(collection)).listed(job_query(state, task, target, ids), skip, limit)
    return [public_job(collection, doc) for doc in docs]


def count_jobs(
    rt: Runtime,
    collection: str,
    state: str | None = None,
    task: str | None = None,
    target: str | None = None,
    ids: list[str] | None = None,
) -> int:
    """How many jobs `find_jobs` finds in all."""
    return rt.jobs(_collection(collection)).count(job_query(state, task, target, ids))


def job_query(
    state: str | None, task: str | None, target: str | None, ids: list[str] | None
) -> dict[str, Any]:
    query: dict[str, Any] = {"$nor": [MARKER_FILTER]}
    if state is not None:
        if state not in STATE_NUMBERS:
            raise BadJobInput(f"unknown job state {state!r}; known: {', '.join(STATE_NUMBERS)}")
        query["state"] = STATE_NUMBERS[state]
    if task is not None:
        query["task"] = task
    if target is not None:
        # A discovered page is named by its URL (it has no target of its own).
        query["$or"] = [{"target": target}, {"url": target, "target": None}]
    if ids:
        query["_id"] = {"$in": [_job_id(i) for i in ids]}
    return query


def remove_job(rt: Runtime, collection: str, job_id: str) -> dict[str, Any]:
    """Delete a job that no crawl holds; the job as it was. A job being crawled is refused
    (its run would wait for a report about it): stop its run, or wait for the crawl."""
    jobs = rt.jobs(_collection(collection))
    doc = jobs.get(_job_id(job_id))
    if doc is None:
        raise JobNotFound(job_id, collection)
    if not jobs.remove_idle(doc["_id"]):
        raise BadJobInput(
            f"job {job_id!r} is being crawled (run {doc.get('run_id') or '?'}): "
            "stop its run or wait for the crawl to end"
        )
    return public_job(collection, doc)


def update_meta(
    rt: Runtime, collection: str, job_id: str, changes: Mapping[str, Any]
) -> dict[str, Any]:
    """Set (or, with a null value, remove) keys of a job's free-form `meta` document."""
    if not changes:
        raise BadJobInput("nothing to change: give at least one meta key")
    if len(changes) > META_MAX_KEYS:
        raise BadJobInput(f"at most {META_MAX_KEYS} meta keys at once")
    for key in changes:
        if not key or "." in key or "\x00" in key or key.startswith("$") or len(key) > 100:
            raise BadJobInput(
                f"meta key {key!r}: 1-100 characters, no '.' or NUL, not starting '$'"
            )
    try:
        bson.encode({"meta": dict(changes)})  # what MongoDB can store: 64-bit ints, UTF-8
    except (bson.errors.BSONError, OverflowError, UnicodeEncodeError) as e:
        raise BadJobInput(f"meta: a value MongoDB cannot store ({type(e).__name__})") from None
    to_set = {f"meta.{k}": v for k, v in changes.items() if v is not None}
    to_unset = {f"meta.{k}": "" for k, v in changes.items() if v is None}
    update: dict[str, Any] = {"$currentDate": {"updated_at": True}}
    if to_set:
        update["$set"] = to_set
    if to_unset:
        update["$unset"] = to_unset
    if not rt.jobs(_collection(collection)).change(_job_id(job_id), update):
        raise JobNotFound(job_id, collection)
    return get_job(rt, collection, job_id)
