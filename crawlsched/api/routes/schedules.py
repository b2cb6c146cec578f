"""Schedules: create, list, change, pause, unpause, stop, delete; their upcoming and missed
runs and their task history."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from zoneinfo import available_timezones

import pydantic_core
from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator
from pydantic.json_schema import SkipJsonSchema

from crawlsched.api.auth import Admin, Reader
from crawlsched.api.idempotent import IdempotencyKey, once
from crawlsched.api.models import Given
from crawlsched.api.openapi import NAMED_JSON_NOTICE, NAMED_WEB_URL
from crawlsched.api.paging import Limit, Offset, Page
from crawlsched.api.problems import PROBLEM_RESPONSES, ApiProblem
from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.control import schedules
from crawlsched.schedules.notice_urls import (
    MAX_NOTICE_URL_CHARS,
    MAX_NOTICES,
    parse_notice_url,
)
from crawlsched.schedules.policies import Misfire, Overlap
from crawlsched.schedules.spec import (
    MAX_CATCH_UP,
    MAX_SHARDS,
    MAX_URL_CHARS,
    NOTIFY_EVENTS,
    SCHEDULE_ID,
    TRIGGER_FIELDS,
)

router = APIRouter(prefix="/v1", tags=["schedules"], responses=PROBLEM_RESPONSES)

Days = Annotated[float | None, Query(gt=0, le=31, description="Horizon in days (default 3).")]
Owner = Annotated[str | None, Query(max_length=200, description="Only this owner's schedules.")]


# What `schedules.spec` accepts, said in the schema. Optional fields admit no null (a null is
# read as not given). The schema's cron is a part of what the route takes: 5 fields, each
# `*`, `*/N` or a number in its range (days of the month up to 28: a schedule that never
# fires is refused); the route reads any cron its trigger can (ranges, lists, names).
_STEP = r"\*(/[1-9])?"
CRON = (
    rf"^({_STEP}|[1-5]?[0-9]) ({_STEP}|1?[0-9]|2[0-3]) ({_STEP}|[1-9]|1[0-9]|2[0-8])"
    rf" ({_STEP}|[1-9]|1[0-2]) ({_STEP}|[0-6])$"
)
NonBlank = Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S")]
JobCollection = Literal[JOB_COLLECTIONS]


NoticeUrl = Annotated[
    str,
    StringConstraints(max_length=MAX_NOTICE_URL_CHARS),
    Field(json_schema_extra={"pattern": NAMED_JSON_NOTICE}),
]


def _zones() -> list[str]:
    return sorted(available_timezones() - {"Factory", "localtime"})


class ScheduleFields(BaseModel):
    """What a schedule is made of (the fields of `crawlsched schedules add`)."""

    model_config = ConfigDict(extra="forbid")

    interval_s: Given[float, Field(ge=0.001, le=10 * 365 * 86400)] = Field(
        None, description="Interval trigger: seconds."
    )
    cron: Given[str, Field(max_length=200, json_schema_extra={"pattern": CRON})] = Field(
        None, description="Cron trigger, 5 fields (ranges and lists too: `0 9 * * 1-5`)."
    )
    timezone: Given[str, Field(max_length=64, json_schema_extra={"enum": _zones()})] = Field(
        None, description="IANA zone of `cron`."
    )
    at: datetime | SkipJsonSchema[None] = Field(
        None, description="One-time trigger, with a zone, in the future."
    )
    collections: Given[list[JobCollection], Field(min_length=1, max_length=10)] = None
    target_collection: JobCollection | SkipJsonSchema[None] = None
    targets: Given[list[NonBlank], Field(min_length=1, max_length=10_000)] = None
    owner: Given[str, Field(max_length=100)] = None
    misfire: Misfire | SkipJsonSchema[None] = None
    catch_up_limit: Given[int, Field(ge=0, le=MAX_CATCH_UP)] = None
    overlap: Overlap | SkipJsonSchema[None] = None
    shards: Given[int, Field(ge=1, le=MAX_SHARDS)] = None
    webhook: Given[
        str, Field(max_length=MAX_URL_CHARS, json_schema_extra={"pattern": NAMED_WEB_URL})
    ] = Field(
        None,
        description="Told of each run's end. (An IP literal is also taken when an allowed "
        "network admits it.)",
    )
    notices: Given[list[NoticeUrl], Field(max_length=MAX_NOTICES)] = Field(
        None,
        description="Apprise URLs told of each run's end (Telegram `tgram://`, Slack "
        "`slack://`, e-mail `mailto://`, …); stored encrypted, shown redacted. A change "
        "replaces the list; `[]` removes them all.",
    )
    notify_on: Given[list[Literal[NOTIFY_EVENTS]], Field(min_length=1, max_length=4)] = None

    @field_validator("notices")
    @classmethod
    def _apprise_urls(cls, urls: list[str] | None) -> list[str] | None:
        """Each a URL Apprise accepts: a 422 naming the entry and its scheme, never the URL."""
        for position, url in enumerate(urls or [], start=1):
            parse_notice_url(url, position)
        return urls

    def given(self) -> dict[str, Any]:
        given = {k: v for k, v in self.model_dump().items() if v not in (None, [])}
        if self.notices == []:  # said on purpose: no notice targets
            given["notices"] = []
        return given


class ScheduleChanges(ScheduleFields):
    """Fields to change, one at least. Whether they fit the schedule as it is (a time zone for
    an interval trigger does not) only the schedule can say: 409 when they do not."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})


# Exactly one trigger; a time zone only with a cron; a sweep of collections, or targets in one.
_NEW_SCHEDULE_RULES = {
    "allOf": [
        {"oneOf": [{"required": [t]} for t in TRIGGER_FIELDS]},
        {"anyOf": [{"not": {"required": ["timezone"]}}, {"required": ["cron"]}]},
        {
            "anyOf": [
                {"required": ["targets", "target_collection"]},
                {"required": ["collections"], "not": {"required": ["targets"]}},
            ]
        },
    ]
}


class NewSchedule(ScheduleFields):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_NEW_SCHEDULE_RULES)
    id: str = Field(..., min_length=1, max_length=100, pattern=SCHEDULE_ID.pattern)


@router.get("/schedules", response_model=Page, summary="List schedules (GetSchedules)")
def list_schedules(
    caller: Reader,
    limit: Limit = 100,
    offset: Offset = 0,
    owner: Owner = None,
    state: Annotated[str | None, Query(max_length=20)] = None,
    include_deleted: bool = False,
) -> dict[str, Any]:
    return schedules.page(caller.rt, limit, offset, owner, state, include_deleted)


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
        lambda: schedules.create(caller.rt, body.id, **fields),
    )


@router.get("/schedules/{schedule_id}", summary="One schedule")
def get_schedule(caller: Reader, schedule_id: str) -> dict[str, Any]:
    return schedules.get(caller.rt, schedule_id)


@router.patch("/schedules/{schedule_id}", summary="Change a schedule (UpdateSchedule)")
def update_schedule(caller: Admin, schedule_id: str, body: ScheduleChanges) -> dict[str, Any]:
    changes = body.given()
    if not changes:
        raise ValueError("nothing to change: give at least one field")
    try:
        return schedules.update(caller.rt, schedule_id, **changes)
    except ValueError as e:  # the changes are well formed: they do not fit this schedule
        raise ApiProblem(409, str(e)) from None


@router.post("/schedules/{schedule_id}/pause", summary="Pause a schedule")
def pause_schedule(caller: Admin, schedule_id: str) -> dict[str, Any]:
    return schedules.pause(caller.rt, schedule_id)


@router.post("/schedules/{schedule_id}/unpause", summary="Unpause a schedule (UnpauseSchedule)")
def unpause_schedule(caller: Admin, schedule_id: str) -> dict[str, Any]:
    return schedules.unpause(caller.rt, schedule_id)


@router.post("/schedules/{schedule_id}/stop", summary="Stop a schedule for good (StopSchedule)")
def stop_schedule(caller: Admin, schedule_id: str) -> dict[str, Any]:
    return schedules.stop(caller.rt, schedule_id)


@router.delete("/schedules/{schedule_id}", summary="Delete a schedule")
def delete_schedule(caller: Admin, schedule_id: str) -> dict[str, Any]:
    return schedules.delete(caller.rt, schedule_id)


@router.post(
    "/schedules/{schedule_id}/fire",
    summary="Make a schedule due now: the next tick fires it (a run now: POST /v1/runs)",
)
def fire_schedule(caller: Admin, schedule_id: str) -> dict[str, Any]:
    return schedules.fire(caller.rt, schedule_id)


@router.get(
    "/schedules/{schedule_id}/upcoming",
    response_model=Page,
    summary="A schedule's next fire times (GetNextSchedules)",
)
def schedule_upcoming(
    caller: Reader,
    request: Request,
    schedule_id: str,
    limit: Limit = 100,
    offset: Offset = 0,
    days: Days = None,
) -> Response:
    known = request.app.state.fire_times
    page = schedules.upcoming(caller.rt, schedule_id, limit, offset, days, known)
    return Response(pydantic_core.to_json(page), media_type="application/json")


@router.get(
    "/upcoming",
    response_model=Page,
    summary="Next fire times of every schedule, or of one owner (GetUpcomingAccountSchedules)",
)
def upcoming(
    caller: Reader,
    request: Request,
    limit: Limit = 100,
    offset: Offset = 0,
    owner: Owner = None,
    days: Days = None,
) -> Response:
    known = request.app.state.fire_times
    page = schedules.upcoming_all(caller.rt, limit, offset, owner, days, known)
    return Response(pydantic_core.to_json(page), media_type="application/json")


@router.get(
    "/schedules/{schedule_id}/missed",
    response_model=Page,
    summary="A schedule's missed runs (GetMissedScheduleRuns)",
)
def schedule_missed(
    caller: Reader, schedule_id: str, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    return schedules.missed(caller.rt, schedule_id, limit, offset)


@router.get("/missed-runs", response_model=Page, summary="Every missed run (GetAllMissedRuns)")
def missed_runs(
    caller: Reader, limit: Limit = 100, offset: Offset = 0, owner: Owner = None
) -> dict[str, Any]:
    return schedules.missed_all(caller.rt, limit, offset, owner)
