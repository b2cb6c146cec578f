"""Task history: one row per job execution, newest first, and its corrections (one row, a
list of rows, or every row with an outcome), each kept in the row's audit trail."""

from __future__ import annotations

from typing import Any

from crawlsched.control.pages import page_of
from crawlsched.control.runs import require
from crawlsched.flow import history_rows
from crawlsched.planning.outcomes import all_outcomes
from crawlsched.runtime import Runtime
from crawlsched.store.history import row_id


def page(
    rt: Runtime,
    limit: int = 100,
    offset: int = 0,
    schedule_id: str | None = None,
    run_id: str | None = None,
    job_id: str | None = None,
    outcome: str | None = None,
) -> dict[str, Any]:
    filters = {"schedule_id": schedule_id, "run_id": run_id, "job_id": job_id, "outcome": outcome}
    return page_of(rt.history.page(filters, limit + 1, offset), limit, offset)


def of_run(rt: Runtime, run_id: str, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    """A run's rows, each with its page's URL and why it failed (kind of error, HTTP status)."""
    require(rt, run_id)
    rows = rt.history.page({"run_id": run_id}, limit + 1, offset)
    return page_of(history_rows.shown_rows(rt, rows), limit, offset)


def check_outcome(label: str | None) -> None:
    if label is not None and label not in all_outcomes():
        raise ValueError(f"unknown outcome {label!r}; known: {', '.join(all_outcomes())}")


def correct(
    rt: Runtime,
    reason: str,
    rows: list[str] | None = None,
    status: str | None = None,
    outcome: str | None = None,
    error: str | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """Correct rows by id (`rows`), or every row whose outcome is `status`."""
    if (rows is None) == (status is None):
        raise ValueError("give rows (one or more ids) or status, not both and not neither")
    changes = {k: v for k, v in {"outcome": outcome, "error": error, "note": note}.items() if v}
    if not changes:
        raise ValueError("nothing to correct: give outcome, error or note")
    if not reason.strip():
        raise ValueError("reason must say why")
    check_outcome(status)
    check_outcome(outcome)
    ids = [row_id(r) for r in rows] if rows is not None else None
    if ids is not None:
        missing = sorted(set(map(str, ids)) - set(map(str, rt.history.existing(ids))))
        if missing:
            raise LookupError(f"no history row {', '.join(missing)}; nothing corrected")
    changed = rt.history.correct(changes, reason.strip(), rt.now(), ids=ids, outcome=status)
    return {"corrected": changed, "set": changes}
