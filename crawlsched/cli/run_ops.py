"""`crawlsched run now|stop|children|history|correct`: act on runs and read their history."""

from __future__ import annotations

import re
from typing import Any

import typer
from rich.table import Table

from crawlsched.cli import discovery, ops
from crawlsched.cli.backend import Backend
from crawlsched.cli.common import backend, bad_input, console, print_json, print_lines
from crawlsched.cli.runs import JSON, RUN_ID, run_app, runs_table
from crawlsched.cli.text import seconds_between
from crawlsched.planning.outcomes import all_outcomes

OUTCOMES = all_outcomes()
HISTORY_ROW = r"[0-9a-fA-F]{24}"


@run_app.command("now")
def run_now(
    ctx: typer.Context,
    schedule_id: str = typer.Argument(..., help="The schedule to run once, now."),
    wait: bool = typer.Option(
        False, "--wait", help="Follow the run to its end (as `run watch`); exit by its result."
    ),
    as_json: bool = JSON,
) -> None:
    """A one-time test run of a schedule: plans it now; its next fire time does not move."""
    api = backend(ctx)
    started = api.call(ops.RUN_NOW, schedule_id=schedule_id)
    run_id = started["run_id"]
    if as_json:
        print_json(started)
    else:
        console.print(f"sent: run {run_id} (see `crawlsched run status {run_id}`)")
    if wait:
        from crawlsched.cli.watch import follow

        raise typer.Exit(follow(api, run_id, quiet=as_json))


@run_app.command("stop")
def stop(
    ctx: typer.Context,
    run_id: str = RUN_ID,
    task: str | None = typer.Option(None, help="Stop only this task of the run."),
    children: bool = typer.Option(False, "--children", help="Stop only the run's children."),
    as_json: bool = JSON,
) -> None:
    """Stop a run: nothing more is dispatched, crawls stop between jobs, waiting batches go."""
    if children and task:
        bad_input("give --task or --children, not both")
    api = backend(ctx)
    if children:
        result = api.call(ops.RUN_STOP_CHILDREN, run_id=run_id)
    else:
        result = api.call(ops.RUN_STOP, run_id=run_id, task=task)
    if as_json:
        print_json(result)
        return
    what = f"task {task} of " if task else ""
    console.print(
        f"stopping {what}{', '.join(result['stopping'])}; released {result['released_jobs']} "
        f"waiting jobs; ended now: {', '.join(result['ended']) or 'none (crawls finish first)'}"
    )


@run_app.command("children")
def children(
    ctx: typer.Context,
    run_id: str = typer.Argument(..., help="A run (multi-process, or one that discovered)."),
    limit: int = typer.Option(50, min=1, max=10_000, help="Discovered jobs to list."),
    skip: int = typer.Option(0, min=0, help="Discovered jobs to skip (paging)."),
    outcome: str | None = typer.Option(
        None, "--outcome", help=f"Only pages whose last try ended so ({', '.join(OUTCOMES)})."
    ),
    errors: bool = typer.Option(False, "--errors", help="Only pages whose last try had an error."),
    as_json: bool = JSON,
) -> None:
    """A run's children: its child runs (multi-process) and the pages its crawls discovered,
    with the outcome and error of each page's last try."""
    if outcome is not None and outcome not in OUTCOMES:
        bad_input(f"--outcome: one of {', '.join(OUTCOMES)}, got {outcome!r}")
    api = backend(ctx)
    filters = {"outcome": outcome, "errors": errors or None}
    rows = api.items(ops.RUN_CHILDREN, limit, run_id=run_id, offset=skip, **filters)
    if as_json:
        print_lines(rows)
        return
    kids = [r for r in rows if r["kind"] == "run"]
    found = [r for r in rows if r["kind"] == "job"]
    if not rows and (outcome or errors):
        api.call(ops.RUN, run_id=run_id)  # an unknown run: one line, exit 2
        what = f"ended {outcome}" if outcome else "ended with an error"
        console.print(f"no page discovered by {run_id} {what}")
        return
    if kids or not found:
        console.print(runs_table(kids, title=f"Child runs of {run_id}: {len(kids)}"))
    if found:
        total = api.call(ops.RUN, run_id=run_id).get("discovered", 0)
        shown = f"{skip + 1}-{skip + len(found)}"
        picked = f" ({outcome or ''}{' with errors' if errors else ''})".replace("( ", "(")
        title = f"Discovered by {run_id}: {shown} of {total}" + (
            picked if outcome or errors else ""
        )
        console.print(discovery.children_table(found, title))


def _job_keys(job: str) -> list[str]:
    """The stored forms a job id given on the command line may have."""
    if job.startswith(("oid:", "int:", "str:")):
        return [job]
    keys = [f"str:{job}"]
    if job.isdigit():
        keys.append(f"int:{job}")
    if re.fullmatch(HISTORY_ROW, job):
        keys.append(f"oid:{job.lower()}")
    return keys


def _history(
    api: Backend, schedule: str | None, job: str | None, run: str | None, limit: int
) -> list[dict[str, Any]]:
    if sum(x is not None for x in (schedule, job, run)) != 1:
        bad_input("give exactly one of --schedule, --job or --run")
    if run is not None:
        return api.items(ops.RUN_HISTORY, limit, run_id=run)
    if schedule is not None:
        rows = api.items(ops.HISTORY, limit, schedule_id=schedule)
        if not rows:
            api.call(ops.SCHEDULE, schedule_id=schedule)  # unknown: one line, exit 2
        return rows
    for key in _job_keys(job or ""):
        if rows := api.items(ops.HISTORY, limit, job_id=key):
            return rows
    bad_input(f"no task history for job {job!r}")


@run_app.command("history")
def history(
    ctx: typer.Context,
    schedule: str | None = typer.Option(None, help="Executions of this schedule's runs."),
    job: str | None = typer.Option(None, help="Executions of this job."),
    run: str | None = typer.Option(None, help="Executions of this run."),
    limit: int = typer.Option(100, min=1, max=10_000),
    as_json: bool = JSON,
) -> None:
    """Task history: one row per job execution, newest first."""
    rows = _history(backend(ctx), schedule, job, run, limit)
    if as_json:
        print_lines(rows)
        return
    table = Table(title=f"Task history ({len(rows)})")
    for column in ("row", "run", "job", "outcome", "items", "account", "node", "took"):
        table.add_column(column)
    for r in rows:
        took = seconds_between(r.get("started_at"), r.get("ended_at"))
        fixed = " (corrected)" if r.get("corrections") else ""
        table.add_row(
            str(r["_id"]),
            r.get("run_id") or "-",
            r.get("job_id") or "-",
            f"{r.get('outcome', '-')}{fixed}",
            str(r.get("items_stored", 0)),
            r.get("account") or "-",
            r.get("node") or "-",
            # A row a restart reclaimed ended without having started.
            "-" if took is None else f"{took:.2f}s",
        )
    console.print(table)


@run_app.command("correct")
def correct(
    ctx: typer.Context,
    rows: list[str] = typer.Option([], "--row", help="A history row id (repeatable)."),
    status: str | None = typer.Option(None, help="Correct every row with this outcome."),
    outcome: str | None = typer.Option(None, help="The corrected outcome."),
    error: str | None = typer.Option(None, help="The corrected error text."),
    note: str | None = typer.Option(None, help="A note kept on the row."),
    reason: str = typer.Option(..., help="Why: kept in the row's audit trail."),
    as_json: bool = JSON,
) -> None:
    """Correct task history: one row, several rows, or all rows with a given outcome."""
    if bool(rows) == (status is not None):
        bad_input("give --row (one or more) or --status, not both and not neither")
    for label in (status, outcome):
        if label is not None and label not in OUTCOMES:
            bad_input(f"unknown outcome {label!r}; known: {', '.join(OUTCOMES)}")
    changes = {k: v for k, v in {"outcome": outcome, "error": error, "note": note}.items() if v}
    if not changes:
        bad_input("nothing to correct: give --outcome, --error or --note")
    if not reason.strip():
        bad_input("--reason must say why")
    for row in rows:
        if not re.fullmatch(HISTORY_ROW, row):
            bad_input(f"not a history row id: {row!r}")
    done = backend(ctx).call(
        ops.HISTORY_CORRECTIONS, rows=rows or None, status=status, reason=reason.strip(), **changes
    )
    if as_json:
        print_json(done)
    else:
        console.print(f"corrected {done['corrected']} rows: {done['set']}")
