"""One run's timeline: progress, outcomes, pages per depth, what it waits for, its stage times
and its pages per second, as `GET /v1/runs/{run}/timeline` and the run's page show them.

While a run goes on, everything is read live (its task history, its discovered jobs, its
waiting batches). When it ends, what only the history and the discovered jobs can tell — the
pages-per-second series, the pages per depth, the first and last fetch — is frozen onto the
run document in the write that ends it (`freeze`), because retention may delete those rows
later; an ended run's timeline is then read from the run document alone.
"""

from __future__ import annotations

from typing import Any

from crawlsched.flow.views import by_depth, waiting_groups
from crawlsched.planning import run_control
from crawlsched.planning.failures import failure_counts
from crawlsched.planning.outcomes import REDO
from crawlsched.planning.run_names import ENDED
from crawlsched.planning.throughput import bucket
from crawlsched.runtime import Runtime


def _ends_a_page(row: dict[str, Any]) -> bool:
    """A machinery failure given back to its run (a redo) is no end: the page comes again."""
    return row.get("outcome") != REDO and not row.get("retried")


def freeze(rt: Runtime, run: dict[str, Any], exact: bool = True) -> dict[str, Any]:
    """What the timeline reads from the task history and the discovered jobs, computed now
    (`exact`: no pages per depth reused from a moment ago; a live view may take them)."""
    rows = rt.history.ends_of(run["_id"])
    final = [r for r in rows if _ends_a_page(r)]
    ends = [r["ended_at"] for r in final if r.get("ended_at") is not None]
    starts = [r["started_at"] for r in rows if r.get("started_at") is not None]
    # From the run's creation: its first batches may go out before its planning closes.
    start = run["created_at"]
    series = bucket([(end - start).total_seconds() for end in ends])
    return {
        "first_fetch_at": min(starts, default=None),
        "last_fetch_at": max(ends, default=None),
        "throughput": {"start": start, "width_s": series.width_s, "counts": list(series.counts)},
        "by_depth": by_depth(rt, run, fresh=exact),
        "executions": len(rows),
        "errors": failure_counts(final),
    }


def timeline(rt: Runtime, run: dict[str, Any]) -> dict[str, Any]:
    ended = run.get("state") in ENDED
    frozen = run.get("timeline") if ended else None
    # An ended run without a frozen timeline ended before timelines were kept: read what is
    # left of its history.
    seen = frozen or freeze(rt, run, exact=ended)
    counts = run.get("counts") or {}
    throughput = seen["throughput"]
    width = throughput["width_s"]
    return {
        "run_id": run["_id"],
        "schedule_id": run.get("schedule_id"),
        "parent_id": run.get("parent_id"),
        "state": run.get("state"),
        "result": run.get("result"),
        "ended": ended,
        "paused": run_control.display_state(run) == run_control.PAUSED,
        # What an operator may do to the run now: `run pause|resume|retry-failed`, the same
        # rules the commands apply (the page shows them; its cookie cannot act).
        "actions": run_control.actions(run, counts),
        "frozen": frozen is not None,
        "progress": {
            "planned": run.get("planned", 0),
            "discovered": run.get("discovered", 0),
            "done": sum(counts.values()),
            "outstanding": 0 if ended else max(run.get("outstanding", 0), 0),
        },
        "outcomes": counts,
        "cut": run.get("cut") or {},
        "items": run.get("items") or {},
        "stages": {
            "created_at": run.get("created_at"),
            "planned_at": run.get("planned_at"),
            "first_fetch_at": seen["first_fetch_at"],
            "last_fetch_at": seen["last_fetch_at"],
            "ended_at": run.get("finished_at"),
        },
        "stage_ms": run.get("stages_ms") or {},
        "throughput": {
            **throughput,
            "pages": sum(throughput["counts"]),
            "rates": [round(n / width, 3) for n in throughput["counts"]],
        },
        "by_depth": seen["by_depth"],
        "executions": seen["executions"],
        # Pages that ended with an error, by HTTP status and by kind (a run frozen before
        # these were counted has none).
        "errors": seen.get("errors") or {"by_status": {}, "by_kind": {}},
        "waiting": [] if ended else waiting_groups(rt, rt.waiting.for_run(run["_id"])),
        "shortages": [
            {"reason": s.get("reason"), "jobs": s.get("jobs", 0), "at": s.get("at")}
            for s in run.get("shortages") or []
        ],
        "now": rt.now(),
    }
