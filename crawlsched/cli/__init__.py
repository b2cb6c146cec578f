"""The `crawlsched` command line (Typer). Each sub-module adds one group of commands."""

from __future__ import annotations

import typer

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
)

app = typer.Typer(
    help="crawlsched: plan, admit, run and watch crawl jobs (dramatiq over RabbitMQ, MongoDB).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
admin.register(app)
demo.register(app)
runs.register(app)
pools.register(app)
doctor.register(app)
activity.register(app)
results.register(app)
app.add_typer(jobs.app, name="jobs", help="Add, import and inspect crawl jobs.")
app.add_typer(schedules.app, name="schedules", help="Create, change and inspect schedules.")
