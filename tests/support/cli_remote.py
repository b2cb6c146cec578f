"""The command line through an API, in the test's process: `run("media", "list")` gives
typer's Result, the command having called the API's routes with `token` (a RemoteBackend)."""

from __future__ import annotations

from collections.abc import Callable

from typer.testing import CliRunner, Result

from crawlsched.cli import app
from crawlsched.cli.remote import RemoteBackend


def remote_cli(url: str, token: str) -> Callable[..., Result]:
    def run(*args: str) -> Result:
        backend = RemoteBackend(url, token, "the test")
        return CliRunner().invoke(app, list(args), obj={"backend": backend})

    return run
