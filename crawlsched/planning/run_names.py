"""Runs by name and state (pure): a run's id from its schedule and fire time, a child run's
from its parent's, the states a run goes through, and whether a run is done or stopping.

A run is one firing of a schedule, `<schedule>@<fire time>`; a multi-process run's children are
`<run>/<shard>`. Its state is `planning`, `running`, then `finished` or `stopped`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

PLANNING, RUNNING, FINISHED, STOPPED = "planning", "running", "finished", "stopped"
ENDED = (FINISHED, STOPPED)


def run_id_for(schedule_id: str, fire_at: datetime) -> str:
    """Deterministic, so that a redelivered plan message lands on the same run. Milliseconds
    appear only when the fire time has some: two fire times in one second stay two runs."""
    fraction = f".{fire_at.microsecond // 1000:03d}" if fire_at.microsecond >= 1000 else ""
    return f"{schedule_id}@{fire_at.strftime('%Y%m%dT%H%M%S')}{fraction}Z"


def schedule_id_of(run_id: str) -> str | None:
    """`sweep-profiles@20261122T153332Z/2` → `sweep-profiles` (child runs included)."""
    return run_id.rpartition("@")[0] or None


def child_run_id(parent_id: str, shard: int) -> str:
    return f"{parent_id}/{shard}"


def parent_run_id(run_id: str) -> str | None:
    """The parent of a child run id (`<run>/<shard>`), None for a top-level run."""
    parent, slash, shard = run_id.rpartition("/")
    return parent if slash and "@" in parent and shard.isdigit() else None


def is_done(run: Mapping[str, Any] | None) -> bool:
    return bool(run) and not run["planning"] and run["outstanding"] <= 0


def is_stopping(run: Mapping[str, Any], task: str | None = None) -> bool:
    if run.get("stop_requested") or run.get("state") == STOPPED:
        return True
    return task is not None and task in (run.get("stopped_tasks") or [])
