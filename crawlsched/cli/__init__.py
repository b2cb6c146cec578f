"""The `crawlsched` command line (Typer). Each sub-module adds one group of commands; each
command asks a backend (`cli/backend.py`: a server's API, or the store itself) and renders the
answer here, on the caller's terminal."""

from __future__ import annotations

import sys

import typer

from crawlsched import __version__
from crawlsched.cli import (
    activity,
    admin,
    crawl,
    demo,
    doctor,
    hosts,
    jobs,
    media,
    pools,
    proxies,
    results,
    run_control,  # noqa: F401  (adds pause/resume/retry-failed to `run`)
    run_ops,  # noqa: F401  (adds now/stop/children/history to `run`)
    runs,
    schedules,
    server,
    watch,  # noqa: F401  (adds watch to `run`)
)
from crawlsched.cli.group import CommandGroup

app = typer.Typer(
    help="crawlsched: plan, admit, run and watch crawl jobs (dramatiq over RabbitMQ, MongoDB).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    cls=CommandGroup,
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
crawl.register(app)
runs.register(app)
pools.register(app)
proxies.register(app)
doctor.register(app)
activity.register(app)
results.register(app)
app.add_typer(jobs.app, name="jobs", help="Add, import and inspect crawl jobs.")
app.add_typer(schedules.app, name="schedules", help="Create, change and inspect schedules.")
app.add_typer(hosts.app, name="hosts", help="Hosts as the cluster paces them (politeness).")
app.add_typer(
    media.app, name="media", help="Media rows: driver, discovery bounds, politeness, tasks."
)


def run(args: list[str], own_process: bool = False) -> int:
    """Run one command; its exit code. Every error is one line on stderr: 2 for a usage error
    or bad input, 1 for an operation that failed (see the README's exit codes).

    `own_process`: the command is the whole process (`crawlsched …` typed in a shell), so an
    embedded store of its own would end with it, and a running server is the store to use
    (`cli/connect.py`)."""
    from typer._click.exceptions import NoArgsIsHelpError

    obj = {"own_process": own_process}
    try:
        result = app(args=args, prog_name="crawlsched", standalone_mode=False, obj=obj)
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        return 1
    except NoArgsIsHelpError:
        return 0  # the help is printed: asking for it is no error
    except typer.TyperException as e:  # usage errors: typer's own click (ClickException)
        ctx = getattr(e, "ctx", None)
        where = ctx.command_path if ctx is not None else "crawlsched"
        text = e.format_message() if hasattr(e, "format_message") else str(e)
        print(f"error: {where}: {text} (see --help)", file=sys.stderr)
        return int(getattr(e, "exit_code", 2))
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    return result if isinstance(result, int) else 0
