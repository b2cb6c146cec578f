"""Schedules: list, one, create, change, pause, unpause, stop, delete, fire now; their upcoming
fire times and missed runs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from crawlsched.control.pages import page_of
from crawlsched.encoding import iso_utc, plain
from crawlsched.flow import schedule_ops
from crawlsched.runtime import Runtime
from crawlsched.schedules.notice_urls import public_schedule
from crawlsched.schedules.spec import horizon
from crawlsched.schedules.upcoming import FireTimeCache

SHOWN = ("active", "paused", "stopped", "done")


def page(
    rt: Runtime,
    limit: int = 100,
    offset: int = 0,
    owner: str | None = None,
    state: str | None = None,
    include_deleted: bool = False,
) -> dict[str, Any]:
    docs = rt.schedules.for_owner(owner, include_deleted)
    if state is not None:
        docs = [d for d in docs if d.get("state", "active") == state]
    return page_of([public_schedule(d) for d in docs[offset : offset + limit + 1]], limit, offset)


def get(rt: Runtime, schedule_id: str) -> dict[str, Any]:
    return plain(public_schedule(rt.schedules.require(schedule_id, "show", SHOWN)))


def given_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The fields given (None and empty lists are not; an empty notice list removes them
    all); a one-time trigger given as text is read as an ISO date and time."""
    given = {k: v for k, v in fields.items() if v not in (None, [])}
    if fields.get("notices") == []:
        given["notices"] = []
    if isinstance(given.get("at"), str):
        try:
            given["at"] = datetime.fromisoformat(given["at"])
        except ValueError:
            raise ValueError(f"at: not an ISO date and time: {given['at']!r}") from None
    return given


def create(rt: Runtime, id: str, **fields: Any) -> dict[str, Any]:
    return plain(public_schedule(schedule_ops.create(rt, id, given_fields(fields))))


def update(rt: Runtime, schedule_id: str, **fields: Any) -> dict[str, Any]:
    changes = given_fields(fields)
    if not changes:
        raise ValueError("nothing to change: give at least one field")
    return plain(public_schedule(schedule_ops.update(rt, schedule_id, changes)))


def pause(rt: Runtime, schedule_id: str) -> dict[str, Any]:
    return plain(public_schedule(schedule_ops.pause(rt, schedule_id)))


def unpause(rt: Runtime, schedule_id: str) -> dict[str, Any]:
    return plain(public_schedule(schedule_ops.unpause(rt, schedule_id)))


def stop(rt: Runtime, schedule_id: str) -> dict[str, Any]:
    return plain(public_schedule(schedule_ops.stop(rt, schedule_id)))


def delete(rt: Runtime, schedule_id: str) -> dict[str, Any]:
    return plain(public_schedule(schedule_ops.delete(rt, schedule_id)))


def fire(rt: Runtime, schedule_id: str) -> dict[str, Any]:
    """Make a schedule due now: the next tick fires it (`run now` fires at once)."""
    rt.schedules.require(schedule_id, "fire", ("active",))
    now = rt.now()
    rt.schedules.fire_now(schedule_id, now)
    return {"schedule_id": schedule_id, "due_at": iso_utc(now)}


def _upcoming(
    rt: Runtime, docs: list[dict], days: float | None, enough: int, known: FireTimeCache | None
) -> list[dict[str, Any]]:
    span = horizon(days if days is not None else rt.settings.schedule_horizon_days)
    rows = schedule_ops.upcoming_runs(rt, docs, span, limit=enough, known=known)
    return [{"schedule_id": str(sid), "fire_at": iso_utc(fire_at)} for sid, fire_at in rows]


def upcoming(
    rt: Runtime,
    schedule_id: str,
    limit: int = 100,
    offset: int = 0,
    days: float | None = None,
    known: FireTimeCache | None = None,
) -> dict[str, Any]:
    """A schedule's next fire times within the horizon (default three days)."""
    doc = rt.schedules.require(schedule_id, "list runs of", ("active", "paused"))
    rows = _upcoming(rt, [doc], days, offset + limit + 1, known)
    return page_of(rows[offset : offset + limit + 1], limit, offset)


def upcoming_all(
    rt: Runtime,
    limit: int = 100,
    offset: int = 0,
    owner: str | None = None,
    days: float | None = None,
    known: FireTimeCache | None = None,
) -> dict[str, Any]:
    rows = _upcoming(rt, rt.schedules.for_owner(owner), days, offset + limit + 1, known)
    return page_of(rows[offset : offset + limit + 1], limit, offset)


def missed(rt: Runtime, schedule_id: str, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    rt.schedules.require(schedule_id, "list missed runs of", SHOWN)
    rows = rt.missed_runs.list(schedule_id, None, offset + limit + 1)
    return page_of(rows[offset:], limit, offset)


def missed_all(
    rt: Runtime, limit: int = 100, offset: int = 0, owner: str | None = None
) -> dict[str, Any]:
    rows = rt.missed_runs.list(None, owner, offset + limit + 1)
    return page_of(rows[offset:], limit, offset)
