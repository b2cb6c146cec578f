"""Why pages failed, counted by HTTP status and by kind of error: what a run's page shows. Pure.

A failed execution's task history row carries its error's kind (the exception's class name,
e.g. `HttpStatusError`, `FetchFailed`, `Refused`) and, when the site answered with an error
status, that status. Rows written before those fields were kept say the same in their error
text (`DriverError: GET … answered 404`), which is read when the fields are missing.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

_KIND = re.compile(r"^([A-Za-z_][A-Za-z0-9_]{0,60}): ")
_STATUS = re.compile(r"\banswered ([1-5][0-9]{2})\b|\bHTTP ([1-5][0-9]{2})\b")


def failure_fields(error: BaseException) -> dict[str, Any]:
    """The fields a failed execution's row keeps about its error."""
    status = getattr(error, "status", None)
    fields: dict[str, Any] = {"error_kind": type(error).__name__}
    if isinstance(status, int) and 100 <= status <= 599:
        fields["http_status"] = status
    return fields


def page_of(job: Mapping[str, Any]) -> str | None:
    """The page a job crawls, as its row shows it: its URL, else its target (a handle)."""
    for name in ("url", "target"):
        if isinstance(job.get(name), str) and job[name]:
            return str(job[name])[:2000]
    return None


def failure_of(row: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """(kind, HTTP status) of an execution's error; (None, None) for one without an error."""
    text = row.get("error") if isinstance(row.get("error"), str) else ""
    kind = row.get("error_kind")
    if not isinstance(kind, str) or not kind:
        found = _KIND.match(text)
        kind = found.group(1) if found else (str(row.get("outcome")) if text else None)
    status = row.get("http_status")
    if not isinstance(status, int):
        found = _STATUS.search(text)
        status = int(found.group(1) or found.group(2)) if found else None
    return kind, status


def failure_counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Pages that ended with an error, by HTTP status and by kind of error."""
    by_status: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    for row in rows:
        kind, status = failure_of(row)
        if kind is not None:
            by_kind[kind] += 1
        if status is not None:
            by_status[str(status)] += 1
    return {"by_status": dict(sorted(by_status.items())), "by_kind": dict(by_kind.most_common())}
