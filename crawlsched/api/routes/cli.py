"""`POST /v1/cli`: run a crawlsched command here for a command line elsewhere (see
`crawlsched.api.cli_runner`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from crawlsched.api import cli_runner
from crawlsched.api.auth import Reader
from crawlsched.api.problems import PROBLEM_RESPONSES, ApiProblem
from crawlsched.store.tokens import allows

router = APIRouter(prefix="/v1", tags=["cli"], responses=PROBLEM_RESPONSES)


class CommandLine(BaseModel):
    model_config = ConfigDict(extra="forbid")
    argv: list[str] = Field(..., max_length=cli_runner.MAX_ARGS)
    uploads: dict[str, str] = Field(default_factory=dict, max_length=8)
    downloads: list[str] = Field(default_factory=list, max_length=8)


class CommandResult(BaseModel):
    exit_code: int
    stdout: str
    stderr: str
    downloads: dict[str, str]


@router.post("/cli", response_model=CommandResult, summary="Run a crawlsched command here")
async def run_cli(caller: Reader, body: CommandLine) -> Any:
    if why := cli_runner.refusal(body.argv):
        raise ApiProblem(400, why)
    if sum(len(v) for v in body.uploads.values()) > cli_runner.MAX_FILE_BYTES:
        raise ApiProblem(400, f"uploads: at most {cli_runner.MAX_FILE_BYTES} bytes in all")
    needed = cli_runner.needed_role(body.argv)
    if not allows(caller.role, needed):
        raise ApiProblem(403, f"`crawlsched {' '.join(body.argv[:2])}` needs an {needed} token")
    outcome = await run_in_threadpool(
        cli_runner.run_command, body.argv, body.uploads, body.downloads
    )
    return CommandResult(**vars(outcome))
