"""Runs: list, look at one, start one now, stop one (or one task, or its children), its
discovered children and its task history."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from crawlsched.api import run_ids  # noqa: F401  (registers `{run_id:run_id}`)
from crawlsched.api.auth import Admin, Caller, Reader
from crawlsched.api.idempotent import IdempotencyKey, once
from crawlsched.api.paging import Limit, Offset, Page, page_of
from crawlsched.api.problems import PROBLEM_RESPONSES, ApiProblem, problem_doc
from crawlsched.api.run_rows import runs_page
from crawlsched.encoding import plain
from crawlsched.errors import RunAlreadyEnded, RunNotFound
from crawlsched.flow import history_rows, run_timeline, schedule_ops, views

router = APIRouter(prefix="/v1", tags=["runs"], responses=PROBLEM_RESPONSES)

EMPTY_RUNS = "Include the runs that planned nothing (a sweep that fired with nothing due)."


class NewRun(BaseModel):
    """A one-time run of a schedule, planned now; its next fire time does not move."""

    model_config = ConfigDict(extra="forbid")
    schedule_id: str = Field(..., min_length=1, max_length=200)


class StopRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str | None = Field(None, max_length=100, description="Stop only this task.")


def _run(caller: Caller, run_id: str) -> dict[str, Any]:
    run = caller.rt.runs.get(run_id)
    if run is None:
        raise RunNotFound(run_id)
    return run


def _sender(request: Request) -> Any:
    """The planner's actor, when messages sent from here reach a worker."""
    if not request.app.state.delivers:
        raise ApiProblem(
            503, "this server has no broker its workers read: it cannot start or stop runs"
        )
    from crawlsched.actors.planner import plan_crawls
    from crawlsched.actors.sends import send_webhook

    return plan_crawls, send_webhook


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
    if caller.rt.schedules.get(body.schedule_id) is None:
        raise LookupError(f"no schedule with id {body.schedule_id!r}")
    plan_crawls, _ = _sender(request)

    def act() -> dict[str, Any]:
        run_id = schedule_ops.run_now(caller.rt, body.schedule_id, plan_crawls.send)
        return {"run_id": run_id, "schedule_id": body.schedule_id}

    return once(request, caller, idempotency_key, body.model_dump(), act, status=202)


@router.get(
    "/runs/{run_id:run_id}/timeline",
    summary="One run's page: progress, outcomes, per depth, waiting, stage times, pages/s",
)
def get_run_timeline(caller: Reader, run_id: str) -> dict[str, Any]:
    """Read live while the run goes on; for an ended run, from what its end froze onto it
    (so it stays whole after retention deletes the run's history and discovered jobs)."""
    return plain(run_timeline.timeline(caller.rt, _run(caller, run_id)))


def _stop_result(summary: Any, task: str | None) -> dict[str, Any]:
    return {
        "stopping": summary.runs,
        "task": task,
        "released_batches": summary.released_batches,
        "released_jobs": summary.released_jobs,
        "ended": summary.ended,
    }


@router.post(
    "/runs/{run_id:run_id}/children/stop",
    summary="Stop a run's child runs (StopChildTasks)",
    responses={503: problem_doc(503)},
)
def stop_children(request: Request, caller: Admin, run_id: str) -> dict[str, Any]:
    from crawlsched.flow.stopping import stop_children as stop

    _run(caller, run_id)
    _, notify = _sender(request)
    summary = stop(caller.rt, run_id, notify)
    if not summary.runs:
        raise ApiProblem(409, f"run {run_id!r} has no running children to stop")
    return _stop_result(summary, None)


@router.post(
    "/runs/{run_id:run_id}/stop",
    summary="Stop a run, or one task of it (StopRun, StopTask)",
    responses={503: problem_doc(503)},
)
def stop_run(
    request: Request, caller: Admin, run_id: str, body: StopRequest | None = None
) -> dict[str, Any]:
    from crawlsched.flow.stopping import stop_run as stop

    _run(caller, run_id)
    _, notify = _sender(request)
    task = body.task if body else None
    try:
        return _stop_result(stop(caller.rt, run_id, task, notify), task)
    except RunAlreadyEnded as e:
        raise ApiProblem(409, str(e)) from None


@router.get(
    "/runs/{run_id:run_id}/children",
    response_model=Page,
    summary="A run's child runs and the jobs it discovered (GetChildTasks)",
)
def run_children(
    caller: Reader, run_id: str, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    run = _run(caller, run_id)
    child_runs = [
        {"kind": "run", "run_id": c["_id"], "state": c["state"]}
        for c in caller.rt.runs.children_of(run_id)
    ]
    if offset + limit + 1 <= len(child_runs):
        return page_of(child_runs[offset : offset + limit + 1], limit, offset)
    skip_jobs = max(offset - len(child_runs), 0)
    jobs = views.children_rows(caller.rt, run["_id"], limit + 1, skip_jobs)
    rows = child_runs[offset:] + [{"kind": "job", **j} for j in jobs]
    return page_of(rows[: limit + 1], limit, offset)


@router.get("/runs/{run_id:run_id}/history", response_model=Page, summary="A run's task history")
def run_history(
    caller: Reader, run_id: str, limit: Limit = 100, offset: Offset = 0
) -> dict[str, Any]:
    _run(caller, run_id)
    rows = caller.rt.history.page({"run_id": run_id}, limit + 1, offset)
    # Each row with its page's URL and why it failed (kind of error, HTTP status).
    return page_of(history_rows.shown_rows(caller.rt, rows), limit, offset)


# `{run_id:run_id}`: a run's id or a child run's, `<run>/<shard>` (`api/run_ids.py`).
@router.get("/runs/{run_id:run_id}", summary="One run: counts, waiting batches, pages per depth")
def get_run(caller: Reader, run_id: str) -> dict[str, Any]:
    return plain(views.run_details(caller.rt, _run(caller, run_id)))
