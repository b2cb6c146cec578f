"""Plain data as table cells: dates (ISO 8601 in the API's JSON) and durations."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def moment(value: Any) -> datetime | None:
    """An ISO 8601 date and time (as the API writes it) in UTC; None for anything else."""
    if isinstance(value, datetime):
        found = value
    elif isinstance(value, str):
        try:
            found = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    return (found if found.tzinfo else found.replace(tzinfo=UTC)).astimezone(UTC)


def when(value: Any, suffix: str = "Z") -> str:
    """A date for a table: UTC to the second, `-` when there is none."""
    found = moment(value)
    return "-" if found is None else f"{found:%Y-%m-%d %H:%M:%S}{suffix}"


def seconds_between(start: Any, end: Any) -> float | None:
    began, ended = moment(start), moment(end)
    return None if began is None or ended is None else (ended - began).total_seconds()


def duration(seconds: Any) -> str:
    """`3.5h (12600 s)`, `45 s`; `-` when there is none."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g}{unit} ({seconds:.0f} s)"
    return f"{seconds:.0f} s"


def soon(value: Any) -> str:
    """A date within a day from now as its UTC time of day (`14:03:27Z`), else in full: a
    host's next start or block end, mostly seconds away."""
    found = moment(value)
    if found is None:
        return "-"
    if abs((found - datetime.now(UTC)).total_seconds()) < 86400:
        return f"{found:%H:%M:%S}Z"
    return f"{found:%Y-%m-%d %H:%M}Z"
