"""Why a job can't be planned, and whether to set it aside or just wait for an operator."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
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


class ReferenceIndex:
    """The media and task rows a job joins to, as the planning pipeline joins them.

    A job's `media_name` finds its media rows, the media's `media_name_id` and the job's task
    find its task rows. A job plans when one of its media is enabled and that media has an
    enabled row for the task; an absent `enabled` means enabled (only `false` disables).
    """

    def __init__(
        self, media: Iterable[Mapping[str, Any]], tasks: Iterable[Mapping[str, Any]]
    ) -> None:
        self._media: dict[Any, list[Mapping[str, Any]]] = {}
        for row in media:
            key = _key(row.get("media_name"))
            if key is not None:
                self._media.setdefault(key, []).append(row)
        self._tasks: dict[tuple[Any, Any], list[Mapping[str, Any]]] = {}
        for row in tasks:
            pair = (_key(row.get("media_name_id")), _key(row.get("name")))
            if None not in pair:
                self._tasks.setdefault(pair, []).append(row)

    def join(self, media_name: Any, task: Any) -> tuple[Mapping[str, Any] | None, list]:
        """The media row and the task rows of that media a job is diagnosed with.

        When the job plans: an enabled media and its enabled rows. Otherwise the closest miss:
        no media, a disabled media, or an enabled media and its (disabled or no) rows.
        """
        media_rows = self._media.get(_key(media_name), [])
        enabled = [m for m in media_rows if m.get("enabled") is not False]
        if not enabled:
            return (media_rows[0] if media_rows else None), []
        for media in enabled:
            rows = [r for r in self._task_rows(media, task) if r.get("enabled") is not False]
            if rows:
                return media, rows
        return enabled[0], self._task_rows(enabled[0], task)

    def plans(self, media_name: Any, task: Any) -> bool:
        """Whether a job of this media and task joins an enabled media and task row.

        `join` gives rows only with an enabled media, and enabled rows first when any exist."""
        _, rows = self.join(media_name, task)
        return bool(rows) and rows[0].get("enabled") is not False

    def _task_rows(self, media: Mapping[str, Any], task: Any) -> list[Mapping[str, Any]]:
        return self._tasks.get((_key(media.get("media_name_id")), _key(task)), [])


def _key(value: Any) -> Any:
    """A joined value as a dictionary key, equal where MongoDB's equality is: 1 and 1.0 are one
    number, `true` is not 1. None for what cannot be a key (null, arrays, documents)."""
    if isinstance(value, bool):
        return (bool, value)
    if isinstance(value, int | float):
        return ("number", value)
    if value is None or not isinstance(value, Hashable):
        return None
    return (type(value), value)


def diagnose(row: Mapping[str, Any]) -> Problem:
    """Classify one audit row (`MongoJobStore.audit`): the job, its `media` row (or None) and
    the `task_row`s of that media for the job's task."""
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
