"""Pause, resume and retry-failed a run: the same flow functions as `crawlsched run pause`,
`run resume` and `run retry-failed`. Each is idempotent in effect, like the stop route:
pausing a paused run or resuming a running one changes nothing and says so."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from crawlsched.api import run_ids  # noqa: F401  (registers `{run_id:run_id}`)
from crawlsched.api.auth import Admin, Caller
from crawlsched.api.problems import PROBLEM_RESPONSES, ApiProblem, problem_doc
from crawlsched.errors import RunNotFound

router = APIRouter(prefix="/v1", tags=["runs"], responses=PROBLEM_RESPONSES)


def _require_run(caller: Caller, run_id: str) -> None:
    if caller.rt.runs.get(run_id) is None:
        raise RunNotFound(run_id)


def _senders(request: Request) -> tuple[Any, Any]:
    """The run's pass and the webhook sender, when messages sent from here reach a worker."""
    if not request.app.state.delivers:
        raise ApiProblem(
            503, "this server has no broker its workers read: it cannot plan a run's pages"
        )
    from crawlsched.actors.sends import send_plan_children, send_webhook

    return send_plan_children, send_webhook


@router.post(
    "/runs/{run_id:run_id}/pause",
    summary="Pause a run: nothing more is dispatched; crawls under way finish",
)
def pause_run(caller: Admin, run_id: str) -> dict[str, Any]:
    from crawlsched.flow.pausing import pause_run as pause

    _require_run(caller, run_id)
    summary = pause(caller.rt, run_id)
    return {
        "paused": summary.runs,
        "already_paused": summary.already,
        "held_batches": summary.held_batches,
        "held_jobs": summary.held_jobs,
    }


@router.post(
    "/runs/{run_id:run_id}/resume",
    summary="Resume a paused run: what waited is planned again",
    responses={503: problem_doc(503)},
)
def resume_run(request: Request, caller: Admin, run_id: str) -> dict[str, Any]:
    from crawlsched.flow.pausing import resume_run as resume

    _require_run(caller, run_id)
    plan_pass, notify = _senders(request)
    summary = resume(caller.rt, run_id, plan_pass, notify)
    return {
        "resumed": summary.runs,
        "was_paused": not summary.already,
        "waiting_jobs": summary.held_jobs,
    }


@router.post(
    "/runs/{run_id:run_id}/retry-failed",
    summary="Crawl again, in the same run, the pages that failed on their own",
    responses={503: problem_doc(503)},
)
def retry_failed(request: Request, caller: Admin, run_id: str) -> dict[str, Any]:
    from crawlsched.flow.retrying import retry_failed as retry

    _require_run(caller, run_id)
    plan_pass, _ = _senders(request)
    summary = retry(caller.rt, run_id, plan_pass)
    return {"run_id": run_id, "reopened": summary.reopened, "pages": summary.pages}
