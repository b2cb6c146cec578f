"""Why a job can't be planned, and whether to set it aside or just wait for an operator."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Problem:
    job_id: Any
    reason: str
    # Set aside: the job document itself must be fixed (then `crawlsched jobs retry-problems`).
    # Waiting: an operator switched something off; the job plans again when it is back on.
    set_aside: bool


def diagnose(row: Mapping[str, Any]) -> Problem:
    """Classify one row of the audit pipeline (`store.pipeline.audit_pipeline`)."""
    job_id = row.get("_id")
    media = row.get("media")
    if isinstance(media, list):  # not unwound: the first (names are unique)
        media = media[0] if media else None
    task = row.get("task")
    if not media:
        return Problem(job_id, f"unknown media {row.get('media_name')!r}", set_aside=True)
    media_name = media.get("media_name", "?")
    # Only an explicit `false` disables (rows of the old system often carry no flag at all).
    if media.get("enabled") is False:
        return Problem(job_id, f"media {media_name} is disabled", set_aside=False)
    task_rows = row.get("task_row") or []
    if not task_rows:
        return Problem(job_id, f"media {media_name} has no task {task!r}", set_aside=True)
    if task_rows[0].get("enabled") is False:
        return Problem(job_id, f"task {task} is disabled for media {media_name}", set_aside=False)
    if not isinstance(row.get("execution_date"), datetime):
        kind = type(row.get("execution_date")).__name__
        return Problem(job_id, f"execution_date is {kind}, not a date", set_aside=True)
    return Problem(job_id, "not plannable for an unknown reason", set_aside=True)
