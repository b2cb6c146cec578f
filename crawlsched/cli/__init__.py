"""The `crawlsched` command line (Typer). Each sub-module adds one group of commands."""

from __future__ import annotations

import sys

import typer

from crawlsched import __version__
from crawlsched.cli import (
    activity,
    admin,
    demo,
    doctor,
    jobs,
    pools,
    results,
    run_ops,  # noqa: F401  (adds now/stop/children/history to `run`)
    runs,
    schedules,
    server,
)

app = typer.Typer(
    help="crawlsched: plan, admit, run and watch crawl jobs (dramatiq over RabbitMQ, MongoDB).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"crawlsched {__version__}")
        raise typer.Exit(0)


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """crawlsched: plan, admit, run and watch crawl jobs (dramatiq over RabbitMQ, MongoDB)."""


admin.register(app)
server.register(app)
demo.register(app)
runs.register(app)
pools.register(app)
doctor.register(app)
activity.register(app)
results.register(app)
app.add_typer(jobs.app, name="jobs", help="Add, import and inspect crawl jobs.")
app.add_typer(schedules.app, name="schedules", help="Create, change and inspect schedules.")


def main() -> None:
    """The `crawlsched` command: through a running API when one applies, else here."""
    from crawlsched.cli.remote import main_argv

    code = main_argv(sys.argv[1:])
    if code is not None:
        raise SystemExit(code)
    app()
