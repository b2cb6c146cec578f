"""Pause, resume and retry-failed: which runs may take them, and what a retry moves.

Pure: no store, no clock. Each rule reads a run document as the store keeps it (`state`,
`planning`, `paused`, `stop_requested`, `announce`, `parent_id`, `children`, `ends`) and
answers with the reason a command is refused, or None when it may go ahead.

A run's state stays what the coordinator needs (`planning`, `running`, `finished`,
`stopped`); `paused` is a flag beside it, so every counting rule is the same paused or not.
`display_state` is what people see: `paused` for a paused run that has not ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from crawlsched.planning.outcomes import Outcome

# The outcomes of pages that failed on their own merits: the page answered with an error, the
# driver failed on it, or it used up its attempts. Not `expired` (the machinery failed it),
# `starved` (no account or node), `stopped`, or discoveries cut by a bound (never crawled).
RETRYABLE = (Outcome.FAILED, Outcome.EXHAUSTED)
OPEN_STATES = ("planning", "running")
PAUSED = "paused"


def display_state(run: Mapping[str, Any]) -> str:
    if run.get("paused") and run.get("state") in OPEN_STATES:
        return PAUSED
    return str(run.get("state"))


def pause_refusal(run: Mapping[str, Any]) -> str | None:
    if run.get("state") not in OPEN_STATES:
        return f"run {run['_id']!r} has ended ({run.get('state')}): nothing to pause"
    if run.get("stop_requested"):
        return f"run {run['_id']!r} is being stopped: nothing to pause"
    return None


def resume_refusal(run: Mapping[str, Any]) -> str | None:
    if run.get("state") not in OPEN_STATES:
        return f"run {run['_id']!r} has ended ({run.get('state')}): nothing to resume"
    return None


def retry_refusal(run: Mapping[str, Any]) -> str | None:
    """Why a run cannot take its failed pages back now, or None."""
    run_id = run["_id"]
    if run.get("parent_id") or run.get("children"):
        return f"run {run_id!r} is part of a multi-process run: retry-failed takes single runs"
    if run.get("stop_requested") or run.get("state") == "stopped":
        return f"run {run_id!r} was stopped: retry-failed reopens finished or running runs"
    if run.get("state") == "planning" or run.get("planning"):
        return f"run {run_id!r} is still planning: try again when it runs"
    if run.get("state") not in ("running", "finished"):
        return f"run {run_id!r} is {run.get('state')}: nothing to retry"
    if run.get("announce"):
        return f"run {run_id!r} has just ended and its end is being announced: try again shortly"
    return None


def moved_counts(taken: Mapping[str, int]) -> dict[str, int]:
    """The `$inc` on a run that takes `taken` failed pages back: each outcome count down by
    what was taken and `outstanding` up by their sum, so the run's totals stay exact (every
    page is counted once, by the outcome of its last try)."""
    inc = {f"counts.{outcome}": -n for outcome, n in taken.items() if n}
    inc["outstanding"] = sum(n for n in taken.values() if n > 0)
    return inc


def end_event_id(run_id: str, event: str, ends: int) -> str:
    """The stable id of a run's `ends`-th end: `<run>:<event>` for the first (as always), then
    `<run>:<event>:<n>`, so a receiver that drops duplicates by id still hears a new end."""
    return f"{run_id}:{event}" if ends <= 1 else f"{run_id}:{event}:{ends}"


def actions(run: Mapping[str, Any], counts: Mapping[str, int]) -> list[str]:
    """The run commands that would be accepted now (`pause`, `resume`, `retry-failed`): what
    the run's page offers. A retry is offered only when the run counted a page that failed on
    its own merits."""
    offered = []
    paused = display_state(run) == PAUSED
    if not paused and pause_refusal(run) is None:
        offered.append("pause")
    if paused and resume_refusal(run) is None:
        offered.append("resume")
    failed = sum(int(counts.get(outcome) or 0) for outcome in RETRYABLE)
    if failed and retry_refusal(run) is None:
        offered.append("retry-failed")
    return offered
