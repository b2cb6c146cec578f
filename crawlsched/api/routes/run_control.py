"""Pause, resume and retry-failed a run: the same functions as `crawlsched run pause`, `run
resume` and `run retry-failed`. Each is idempotent in effect, like the stop route: pausing a
paused run or resuming a running one changes nothing and says so."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from crawlsched.api import run_ids  # noqa: F401  (registers `{run_id:run_id}`)
from crawlsched.api.auth import Admin
from crawlsched.api.problems import PROBLEM_RESPONSES, problem_doc
from crawlsched.api.senders import senders_of
from crawlsched.control import runs

router = APIRouter(prefix="/v1", tags=["runs"], responses=PROBLEM_RESPONSES)
PLAN = "plan a run's pages"


@router.post(
    "/runs/{run_id:run_id}/pause",
    summary="Pause a run: nothing more is dispatched; crawls under way finish",
)
def pause_run(caller: Admin, run_id: str) -> dict[str, Any]:
    return runs.pause(caller.rt, run_id)


@router.post(
    "/runs/{run_id:run_id}/resume",
    summary="Resume a paused run: what waited is planned again",
    responses={503: problem_doc(503)},
)
def resume_run(request: Request, caller: Admin, run_id: str) -> dict[str, Any]:
    runs.require(caller.rt, run_id)
    return runs.resume(caller.rt, senders_of(request, PLAN), run_id)


@router.post(
    "/runs/{run_id:run_id}/retry-failed",
    summary="Crawl again, in the same run, the pages that failed on their own",
    responses={503: problem_doc(503)},
)
def retry_failed(request: Request, caller: Admin, run_id: str) -> dict[str, Any]:
    runs.require(caller.rt, run_id)
    return runs.retry_failed(caller.rt, senders_of(request, PLAN), run_id)
