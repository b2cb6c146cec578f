"""A media row as the command line edits it: read back from the store into the reference file's
shape, changed, and checked by the same model the reference file is (`MediaRow`).

Pure: the caller reads the stored rows and the names of the known drivers, and saves the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from crawlsched.errors import ReferenceDataError
from crawlsched.reference import MediaRow, TaskRow

# Task row fields as stored beside the ones the reference file sets (the join keys).
_TASK_KEYS = tuple(TaskRow.model_fields)
_MEDIA_KEYS = tuple(k for k in MediaRow.model_fields if k not in ("name", "id", "tasks"))


def stored_row(media: Mapping[str, Any], tasks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The reference file's row for a stored media and its task rows (None values left out)."""
    row: dict[str, Any] = {
        "name": media.get("media_name"),
        "id": media.get("media_name_id", media.get("_id")),
    }
    for key in _MEDIA_KEYS:
        if media.get(key) is not None:
            row[key] = media[key]
    row["tasks"] = {
        str(task["name"]): {k: task[k] for k in _TASK_KEYS if task.get(k) is not None}
        for task in tasks
    }
    return row


def changed_row(
    current: Mapping[str, Any] | None,
    changes: Mapping[str, Any],
    task_changes: Mapping[str, Mapping[str, Any]],
    drivers: Iterable[str],
) -> MediaRow:
    """`current` (None: a new row) with `changes` (None values: unchanged; a dict value such as
    `politeness` merged into the one stored) and the tasks of `task_changes` added or changed.
    ReferenceDataError names the field that is wrong."""
    row = dict(current or {})
    for key, value in changes.items():
        if value is None:
            continue
        if isinstance(value, dict):
            merged = {**(row.get(key) or {}), **value}
            row[key] = {k: v for k, v in merged.items() if v is not None}
        else:
            row[key] = value
    tasks = {name: dict(task) for name, task in (row.get("tasks") or {}).items()}
    for name, given in task_changes.items():
        task = tasks.setdefault(name, {"need_login": False, "need_selenium": False})
        task.update({k: v for k, v in given.items() if v is not None})
        task.setdefault("crawl_limit", DEFAULT_CRAWL_LIMIT)
    row["tasks"] = tasks
    if not tasks:
        raise ReferenceDataError("tasks: a media needs at least one task (--task)")
    try:
        media = MediaRow.model_validate(row)
    except ValidationError as e:
        raise ReferenceDataError(_describe(e)) from None
    known = sorted(set(drivers))
    if media.driver_class not in known:
        raise ReferenceDataError(
            f"driver_class: no crawl driver named {media.driver_class!r}; known: {', '.join(known)}"
        )
    return media


DEFAULT_CRAWL_LIMIT = 100


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)
