"""`POST /v1/cli`: run a crawlsched command here for a command line elsewhere (see
`crawlsched.api.cli_runner`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from crawlsched import commands
from crawlsched.api import cli_runner
from crawlsched.api.auth import Reader
from crawlsched.api.problems import PROBLEM_RESPONSES, ApiProblem, problem_doc
from crawlsched.store.tokens import allows

router = APIRouter(prefix="/v1", tags=["cli"], responses=PROBLEM_RESPONSES)


class CommandLine(BaseModel):
    model_config = ConfigDict(extra="forbid")
    argv: list[str] = Field(..., max_length=commands.MAX_ARGS)
    uploads: dict[str, str] = Field(
        default_factory=dict,
        max_length=8,
        description="The files the command reads, by the NAME of its `@upload:NAME` arguments "
        "(a folder: base64 of a gzipped tar).",
    )
    downloads: list[str] = Field(
        default_factory=list,
        max_length=8,
        description="The `@upload:NAME` arguments the command writes, to send back.",
    )


class CommandResult(BaseModel):
    exit_code: int
    stdout: str
    stderr: str
    downloads: dict[str, str]


@router.post(
    "/cli",
    response_model=CommandResult,
    summary="Run a crawlsched command here",
    responses={503: problem_doc(503)},
)
async def run_cli(caller: Reader, body: CommandLine, request: Request) -> Any:
    if why := commands.refusal(body.argv):
        raise ApiProblem(400, why)
    needed = commands.needed_role(body.argv)
    if not allows(caller.role, needed):
        raise ApiProblem(403, f"`crawlsched {' '.join(body.argv[:2])}` needs an {needed} token")
    run = request.app.state.run_command
    if run is None:
        raise ApiProblem(503, "this server runs no commands")
    outcome = await run_in_threadpool(
        cli_runner.run_command, run, body.argv, body.uploads, body.downloads
    )
    if outcome.refused is not None:
        raise ApiProblem(400, outcome.refused, kind="remote-refused")
    return CommandResult(
        exit_code=outcome.exit_code,
        stdout=outcome.stdout,
        stderr=outcome.stderr,
        downloads=outcome.downloads,
    )
