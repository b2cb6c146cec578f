"""The indexes of a job collection: each one names the query it serves."""

from __future__ import annotations

from typing import Any

from pymongo import ASCENDING, DESCENDING

from crawlsched.planning.retention import EXPIRE_AT

JOB_INDEXES: list[tuple[list[tuple[str, int]], dict[str, Any]]] = [
    # The pipeline's $match + $sort.
    (
        [
            ("task", ASCENDING),
            ("state", ASCENDING),
            ("execution_date", ASCENDING),
            ("human_validation", DESCENDING),
            ("certitude", DESCENDING),
            ("modified_at", ASCENDING),
        ],
        {"name": "due_by_priority"},
    ),
    ([("dispatch_id", ASCENDING)], {"name": "dispatch", "sparse": True}),
    ([("last_dispatch_id", ASCENDING)], {"name": "last_dispatch", "sparse": True}),
    ([("run_id", ASCENDING)], {"name": "run", "sparse": True}),
    # A run's discovered jobs: its children pass, `run status` per depth, the ticker's sweep.
    (
        [("scope_run", ASCENDING), ("state", ASCENDING), ("task", ASCENDING)],
        {"name": "children", "sparse": True},
    ),
    # A page's children: counted by its run, and released, when the page's end is counted.
    ([("parent_job", ASCENDING)], {"name": "parent_job", "sparse": True}),
    # A run's jobs in batches that have not begun: the take-over's look and the count that
    # decides an early hand-over, and a held host's pages read to keep it busy
    # (`TakeOvers.open_to_take_over`, `queued_at_least`, `queued_of_host`). Only
    # queued jobs carry the mark, so the index stays small however big the run.
    (
        [("run_id", ASCENDING), ("task", ASCENDING)],
        {"name": "queued", "partialFilterExpression": {"unstarted": True}},
    ),
    # Discovered jobs expire after their run ended (`MongoChildStore.expire_with_run` sets the
    # date then); imported and scheduled jobs never carry the field, so never expire.
    ([(EXPIRE_AT, ASCENDING)], {"name": "expiry", "expireAfterSeconds": 0, "sparse": True}),
    ([("state", ASCENDING), ("lease_deadline", ASCENDING)], {"name": "running_by_deadline"}),
    # Jobs the machinery failed, waiting for another try in their run (the ticker's sweep).
    ([("redo_run", ASCENDING), ("execution_date", ASCENDING)], {"name": "redo", "sparse": True}),
    # One job per (media, target, task) among the jobs we write; the old system's jobs carry
    # no `target` and are left out of the index rather than rejected by it.
    (
        [("media_name_id", ASCENDING), ("target", ASCENDING), ("task", ASCENDING)],
        {
            "name": "target_task_unique",
            "unique": True,
            "partialFilterExpression": {"target": {"$type": "string"}},
        },
    ),
]
