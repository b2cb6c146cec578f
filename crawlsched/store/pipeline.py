"""Step 2: the aggregation over one job collection and one task, as plain data.

Written in the subset that MongoDB ≥ 6, mongomock and the multi-process test server all accept:
`$lookup` with localField/foreignField, `$unwind` then `$match`, `$ne` instead of `$not`, `now`
passed in. Rows stream through a cursor in priority order; the category is read from each row.

Joins as the old system's pipeline does, so that its databases plan as they are: a job's
`media_name` to `childs_socialmedia.media_name`, then that media's `media_name_id` and the
job's task to a `core_tasks` row. A flag that is absent means enabled: only `false` disables.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from crawlsched.catalog import PLANNABLE_STATES
from crawlsched.planning.due import Category

MEDIA_COLLECTION = "childs_socialmedia"
TASKS_COLLECTION = "core_tasks"

# Fields lifted from the joined media and task rows onto each job (`$addFields`).
LIFTED_FIELDS = {
    "media_name": "$media.media_name",
    "media_id": "$media.media_name_id",
    "driver_class": "$media.driver_class",
    "used_tool": "$media.used_tool",
    "need_login": "$task_row.need_login",
    "need_selenium": "$task_row.need_selenium",
    "crawl_limit": "$task_row.crawl_limit",
    "batch_limit": "$task_row.batch_limit",
    "media_proxy": "$media.proxy",  # set: the media goes out through proxies
}

# Priority: human-validated first, then most certain, then the longest untouched; `_id` last so
# that ties are broken the same way on every backend (otherwise the order is unspecified).
PRIORITY_SORT = {"human_validation": -1, "certitude": -1, "modified_at": 1, "_id": 1}

# Only what batching and the crawl message need (and the fields a target may be derived from,
# see `planning.due.derive_target`); the worker loads the rest of the job itself.
PROJECTED_FIELDS = ("_id", "target", "task", *LIFTED_FIELDS)


def _projection(target_fields: list[str]) -> dict[str, int]:
    return dict.fromkeys([*PROJECTED_FIELDS, *target_fields], 1)


def due_filter(
    now: datetime, task: str | None = None, targets: list[str] | None = None
) -> dict[str, Any]:
    """Jobs that are enabled, pending or failed, not exhausted or set aside, and due by `now`;
    with `targets` (a target-set schedule), only the jobs of those targets."""
    match: dict[str, Any] = {
        "execution_date": {"$lte": now},
        "enabled": {"$ne": False},
        "state": {"$in": list(PLANNABLE_STATES)},
        "exhausted": {"$ne": True},
        "problem": None,
        # Jobs discovered while crawling belong to the run that found them: only that run's
        # children pass (`children_filter`) plans them, never a sweep.
        "scope_run": None,
        # A job the machinery failed waits for another try in its run (`run_work_filter`).
        "redo_run": None,
    }
    if task is not None:
        match["task"] = task
    if targets is not None:
        match["target"] = {"$in": list(targets)}
    return match


def row_category(row: dict[str, Any]) -> Category:
    # Only `true` counts as a need: a missing or non-boolean flag is "no" here, so every row
    # lands in exactly one category; parse_due_job then refuses non-boolean flags with a reason.
    return Category.of(row.get("need_login") is True, row.get("need_selenium") is True)


def _media_join() -> list[dict[str, Any]]:
    return [
        {
            "$lookup": {
                "from": MEDIA_COLLECTION,
                "localField": "media_name",
                "foreignField": "media_name",
                "as": "media",
            }
        }
    ]


def _task_join(into: str) -> list[dict[str, Any]]:
    # After `$unwind: $media` the media's id is `media.media_name_id`.
    return [
        {
            "$lookup": {
                "from": TASKS_COLLECTION,
                "localField": "media.media_name_id",
                "foreignField": "media_name_id",
                "as": into,
            }
        }
    ]


def children_filter(run_id: str, task: str | None = None) -> dict[str, Any]:
    """A run's discovered jobs that may be dispatched now: released (the report of the crawl
    that found them was applied, so the run counts them), never tried (a child's own failure
    is final for the run), pending."""
    match: dict[str, Any] = {
        "scope_run": run_id,
        "released": True,
        "last_outcome": None,
        "state": 1,
    }
    if task is not None:
        match["task"] = task
    return match


def redo_filter(run_id: str, now: datetime) -> dict[str, Any]:
    """A run's jobs the machinery failed (a worker died, a dispatch was reclaimed) whose
    backoff has passed: the run still counts them outstanding and crawls them again."""
    return {"redo_run": run_id, "state": 1, "execution_date": {"$lte": now}}


def run_work_filter(run_id: str, now: datetime) -> dict[str, Any]:
    """What a run's own pass dispatches: its released, never-tried children and its jobs due
    for another try after a machinery failure."""
    return {"$or": [children_filter(run_id), redo_filter(run_id, now)]}


def planning_pipeline(
    task: str,
    now: datetime,
    target_fields: list[str] = (),
    targets: list[str] | None = None,
    match: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The due jobs of one task, joined and in priority order, one small document each.

    Rows stream through a cursor: no reply document grows with the number of jobs (a `$facet`
    of the four lists would be one document, capped at 16 MB). The category is read from the
    lifted need flags by whoever consumes the rows (`row_category`). `match` replaces the
    due filter (a run's children pass).
    """
    return [
        {"$match": match if match is not None else due_filter(now, task, targets)},
        {"$sort": PRIORITY_SORT},
        # Only what the joins and the row need travels further (smaller documents to join).
        {"$project": dict.fromkeys(["_id", "target", "task", "media_name", *target_fields], 1)},
        *_media_join(),
        {"$unwind": "$media"},
        {"$match": {"media.enabled": {"$ne": False}}},
        *_task_join("task_row"),
        {"$unwind": "$task_row"},
        {"$match": {"task_row.name": task, "task_row.enabled": {"$ne": False}}},
        {"$addFields": LIFTED_FIELDS},
        {"$project": _projection(target_fields)},
    ]


def audit_filter(now: datetime) -> dict[str, Any]:
    """The jobs the audit looks at: enabled, plannable, not set aside, due or not."""
    base = due_filter(now)
    base.pop("execution_date")
    return base


# A job whose execution date is not a date: MongoDB's type bracketing hides it from `$lte`.
UNDATED = {"$nor": [{"execution_date": {"$type": "date"}}]}

# What an audit row carries of the job (`planning.problems.diagnose` reads it).
AUDIT_FIELDS = ("_id", "target", "task", "media_name_id", "media_name", "execution_date")
