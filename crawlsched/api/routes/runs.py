"""Runs: list, look at one, start one now, stop one (or one task, or its children), its
discovered children, its resources, the items it stored and its task history."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from crawlsched.api import run_ids  # noqa: F401  (registers `{run_id:run_id}`)
from crawlsched.api.auth import Admin, Reader
from crawlsched.api.idempotent import IdempotencyKey, once
from crawlsched.api.paging import Limit, Offset, Page
from crawlsched.api.problems import PROBLEM_RESPONSES, problem_doc
from crawlsched.api.run_rows import runs_page
from crawlsched.api.senders import senders_of
from crawlsched.control import history, runs
from crawlsched.errors import ScheduleNotFound
from crawlsched.planning.outcomes import all_outcomes

router = APIRouter(prefix="/v1", tags=["runs"], responses=PROBLEM_RESPONSES)

EMPTY_RUNS = "Include the runs that planned nothing (a sweep that fired with nothing due)."
Outcome = Literal[tuple(all_outcomes())]  # type: ignore[valid-type]


class NewRun(BaseModel):
    """A one-time run of a schedule, planned now; its next fire time does not move."""

    model_config = ConfigDict(extra="forbid")
    schedule_id: str = Field(..., min_length=1, max_length=200)


class StopRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str | None = Field(None, max_length=100, description="Stop only this task.")


@router.get("/runs", response_model=Page, summary="List runs, newest first")
def list_runs(
    request: Request,
    caller: Reader,
    limit: Limit = 100,
    offset: Offset = 0,
    state: Annotated[str | None, Query(max_length=20)] = None,
    schedule_id: Annotated[str | None, Query(max_length=200)] = None,
    empty: Annotated[bool, Query(description=EMPTY_RUNS)] = False,
) -> Response:
    rows = request.app.state.run_rows
    body = runs_page(caller.rt.runs, rows, limit, offset, state, schedule_id, empty=empty)
    return Response(body, media_type="application/json")


@router.post(
    "/runs",
    status_code=202,
    summary="Run a schedule once, now (OneTimeTestRun)",
    responses={503: problem_doc(503)},
)
def create_run(
    request: Request, caller: Admin, body: NewRun, idempotency_key: IdempotencyKey = None
) -> Any:
    if caller.rt.schedules.get(body.schedule_id) is None:  # before 503: a name is checked first
        raise ScheduleNotFound(body.schedule_id)
    senders = senders_of(request)
    return once(
        request,
        caller,
        idempotency_key,
        body.model_dump(),
        lambda: runs.start(caller.rt, senders, body.schedule_id),
        status=202,
    )


@router.get(
    "/runs/{run_id:run_id}/timeline",
    summary="One run's page: progress, outcomes, per depth, waiting, stage times, pages/s",
)
def get_run_timeline(caller: Reader, run_id: str) -> dict[str, Any]:
    """Read live while the run goes on; for an ended run, from what its end froze onto it
    (so it stays whole after retention deletes the run's history and discovered jobs)."""
    return runs.timeline(caller.rt, run_id)


@router.post(
    "/runs/{run_id:run_id}/children/stop",
    summary="Stop a run's child runs (StopChildTasks)",
    responses={503: problem_doc(503)},
)
def stop_children(request: Request, caller: Admin, run_id: str) -> dict[str, Any]:
    runs.require(caller.rt, run_id)
    return runs.stop_children(caller.rt, senders_of(request), run_id)


@router.post(
    "/runs/{run_id:run_id}/stop",
    summary="Stop a run, or one task of it (StopRun, StopTask)",
    responses={503: problem_doc(503)},
)
def stop_run(
    request: Request, caller: Admin, run_id: str, body: StopRequest | None = None
) -> dict[str, Any]:
    runs.require(caller.rt, run_id)
    return runs.stop(caller.rt, senders_of(request), run_id, body.task if body else None)


@router.get(
    "/runs/{run_id:run_id}/children",
    response_model=Page,
    summary="A run's child runs and the jobs it discovered (GetChildTasks)",
)
def run_children(
    caller: Reader,
    run_id: str,
    limit: Limit = 100,
    offset: Offset = 0,
    outcome: Annotated[Outcome | None, Query(description="Pages whose last try ended so.")] = None,
    errors: Annotated[bool, Query(description="Only pages whose last try had an error.")] = False,
) -> dict[str, Any]:
    return runs.children(caller.rt, run_id, limit, offset, outcome, errors)


@router.get(
    "/runs/{run_id:run_id}/resources",
    response_model=Page,
    summary="Which account and node served each batch of a run, and how long it waited",
)
def run_resources(
    caller: Reader, run_id: str, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    return runs.resources(caller.rt, run_id, limit, offset)


@router.get(
    "/runs/{run_id:run_id}/items",
    response_model=Page,
    summary="What a run's crawls stored, every data model, oldest first",
)
def run_items(
    caller: Reader,
    run_id: str,
    limit: Limit = 100,
    offset: Offset = 0,
    since: Annotated[
        datetime | None, Query(description="Only items last seen then or later.")
    ] = None,
) -> dict[str, Any]:
    return runs.items(caller.rt, run_id, since, limit, offset)


@router.get("/runs/{run_id:run_id}/history", response_model=Page, summary="A run's task history")
def run_history(
    caller: Reader, run_id: str, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    return history.of_run(caller.rt, run_id, limit, offset)


# `{run_id:run_id}`: a run's id or a child run's, `<run>/<shard>` (`api/run_ids.py`).
@router.get("/runs/{run_id:run_id}", summary="One run: counts, waiting batches, pages per depth")
def get_run(caller: Reader, run_id: str) -> dict[str, Any]:
    return runs.view(caller.rt, run_id)
