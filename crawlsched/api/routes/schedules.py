"""Schedules: create, list, change, pause, unpause, stop, delete; their upcoming and missed
runs and their task history."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from crawlsched.api.auth import Admin, Reader
from crawlsched.api.idempotent import IdempotencyKey, once
from crawlsched.api.paging import Limit, Offset, Page, page_of
from crawlsched.api.problems import PROBLEM_RESPONSES
from crawlsched.encoding import plain
from crawlsched.flow import schedule_ops
from crawlsched.schedules.spec import horizon

router = APIRouter(prefix="/v1", tags=["schedules"], responses=PROBLEM_RESPONSES)

SHOWN = ("active", "paused", "stopped", "done")
Days = Annotated[float | None, Query(gt=0, le=31, description="Horizon in days (default 3).")]
Owner = Annotated[str | None, Query(max_length=200, description="Only this owner's schedules.")]


class ScheduleFields(BaseModel):
    """What a schedule is made of (the fields of `crawlsched schedules add`)."""

    model_config = ConfigDict(extra="forbid")

    interval_s: float | None = Field(None, gt=0, description="Interval trigger: seconds.")
    cron: str | None = Field(None, max_length=200, description="Cron trigger, 5 fields.")
    timezone: str | None = Field(None, max_length=64, description="IANA zone of `cron`.")
    at: datetime | None = Field(None, description="One-time trigger, with a zone.")
    collections: list[str] | None = Field(None, max_length=10)
    target_collection: str | None = Field(None, max_length=64)
    targets: list[str] | None = Field(None, max_length=10_000)
    owner: str | None = Field(None, max_length=200)
    misfire: str | None = Field(None, max_length=20)
    catch_up_limit: int | None = Field(None, ge=0, le=10_000)
    overlap: str | None = Field(None, max_length=20)
    shards: int | None = Field(None, ge=1, le=64)
    webhook: str | None = Field(None, max_length=2000)
    notify_on: list[str] | None = Field(None, max_length=3)

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v not in (None, [])}


class NewSchedule(ScheduleFields):
    id: str = Field(..., min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][\w.:-]*$")


@router.get("/schedules", response_model=Page, summary="List schedules (GetSchedules)")
def list_schedules(
    caller: Reader,
    limit: Limit = 100,
    offset: Offset = 0,
    owner: Owner = None,
    state: Annotated[str | None, Query(max_length=20)] = None,
    include_deleted: bool = False,
) -> dict[str, Any]:
    docs = caller.rt.schedules.for_owner(owner, include_deleted)
    if state is not None:
        docs = [d for d in docs if d.get("state", "active") == state]
    return page_of(docs[offset : offset + limit + 1], limit, offset)


@router.post("/schedules", status_code=201, summary="Create a schedule (Schedule)")
def create_schedule(
    request: Request, caller: Admin, body: NewSchedule, idempotency_key: IdempotencyKey = None
) -> Any:
    fields = body.given()
    fields.pop("id")
    return once(
        request,
        caller,
        idempotency_key,
        body.model_dump(mode="json"),
        lambda: schedule_ops.create(caller.rt, body.id, fields),
    )


@router.get("/schedules/{schedule_id}", summary="One schedule")
def get_schedule(caller: Reader, schedule_id: str) -> dict[str, Any]:
    return plain(caller.rt.schedules.require(schedule_id, "show", SHOWN))


@router.patch("/schedules/{schedule_id}", summary="Change a schedule (UpdateSchedule)")
def update_schedule(caller: Admin, schedule_id: str, body: ScheduleFields) -> dict[str, Any]:
    changes = body.given()
    if not changes:
        raise ValueError("nothing to change: give at least one field")
    return plain(schedule_ops.update(caller.rt, schedule_id, changes))


@router.post("/schedules/{schedule_id}/pause", summary="Pause a schedule")
def pause_schedule(caller: Admin, schedule_id: str) -> dict[str, Any]:
    return plain(schedule_ops.pause(caller.rt, schedule_id))


@router.post("/schedules/{schedule_id}/unpause", summary="Unpause a schedule (UnpauseSchedule)")
def unpause_schedule(caller: Admin, schedule_id: str) -> dict[str, Any]:
    return plain(schedule_ops.unpause(caller.rt, schedule_id))


@router.post("/schedules/{schedule_id}/stop", summary="Stop a schedule for good (StopSchedule)")
def stop_schedule(caller: Admin, schedule_id: str) -> dict[str, Any]:
    return plain(schedule_ops.stop(caller.rt, schedule_id))


@router.delete("/schedules/{schedule_id}", summary="Delete a schedule")
def delete_schedule(caller: Admin, schedule_id: str) -> dict[str, Any]:
    return plain(schedule_ops.delete(caller.rt, schedule_id))


def _upcoming(
    caller: Reader, docs: list[dict], days: float | None, enough: int
) -> list[dict[str, Any]]:
    """Fire times in the horizon, computed only as far as a page needs (`enough` each)."""
    span = horizon(days if days is not None else caller.rt.settings.schedule_horizon_days)
    rows = schedule_ops.upcoming_runs(caller.rt, docs, span, limit=enough)
    return [{"schedule_id": sid, "fire_at": fire_at} for sid, fire_at in rows]


@router.get(
    "/schedules/{schedule_id}/upcoming",
    response_model=Page,
    summary="A schedule's next fire times (GetNextSchedules)",
)
def schedule_upcoming(
    caller: Reader, schedule_id: str, limit: Limit = 100, offset: Offset = 0, days: Days = None
) -> dict[str, Any]:
    doc = caller.rt.schedules.require(schedule_id, "list runs of", ("active", "paused"))
    rows = _upcoming(caller, [doc], days, offset + limit + 1)
    return page_of(rows[offset : offset + limit + 1], limit, offset)


@router.get(
    "/upcoming",
    response_model=Page,
    summary="Next fire times of every schedule, or of one owner (GetUpcomingAccountSchedules)",
)
def upcoming(
    caller: Reader, limit: Limit = 100, offset: Offset = 0, owner: Owner = None, days: Days = None
) -> dict[str, Any]:
    rows = _upcoming(caller, caller.rt.schedules.for_owner(owner), days, offset + limit + 1)
    return page_of(rows[offset : offset + limit + 1], limit, offset)


@router.get(
    "/schedules/{schedule_id}/missed",
    response_model=Page,
    summary="A schedule's missed runs (GetMissedScheduleRuns)",
)
def schedule_missed(
    caller: Reader, schedule_id: str, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    caller.rt.schedules.require(schedule_id, "list missed runs of", SHOWN)
    rows = caller.rt.missed_runs.list(schedule_id, None, offset + limit + 1)
    return page_of(rows[offset:], limit, offset)


@router.get("/missed-runs", response_model=Page, summary="Every missed run (GetAllMissedRuns)")
def missed_runs(
    caller: Reader, limit: Limit = 100, offset: Offset = 0, owner: Owner = None
) -> dict[str, Any]:
    rows = caller.rt.missed_runs.list(None, owner, offset + limit + 1)
    return page_of(rows[offset:], limit, offset)
