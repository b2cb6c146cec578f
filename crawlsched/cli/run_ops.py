"""`crawlsched run now|stop|children|history|correct`: act on runs and read their history."""

from __future__ import annotations

import contextlib
from typing import Any

import typer
from rich.table import Table

from crawlsched.cli import discovery
from crawlsched.cli.common import (
    bad_input,
    cli_runtime,
    console,
    ensure_broker,
    print_json,
    sends_messages,
)
from crawlsched.cli.runs import require_run, run_app, runs_table
from crawlsched.errors import CrawlschedError
from crawlsched.flow import schedule_ops
from crawlsched.ids import decode_id
from crawlsched.planning.outcomes import all_outcomes
from crawlsched.runtime import Runtime
from crawlsched.store.history import row_id

OUTCOMES = all_outcomes()


def _with_broker() -> Any:
    """Set the broker up (messages leave this process) and return the webhook sender."""
    ensure_broker()
    from crawlsched.actors.sends import send_webhook

    return send_webhook


def _print_json(docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        print_json(doc)


@run_app.command("now")
def run_now(
    schedule_id: str = typer.Argument(..., help="The schedule to run once, now."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """A one-time test run of a schedule: plans it now; its next fire time does not move."""
    with cli_runtime() as rt:
        if rt.schedules.get(schedule_id) is None:
            bad_input(f"no schedule with id {schedule_id!r}")
        if not sends_messages(rt.settings):
            # A stub broker lives and dies with this command: the message would reach nobody.
            bad_input("run now sends a message to the workers: set CRAWLSCHED_BROKER_URL=amqp://…")
        _with_broker()
        from crawlsched.actors.planner import plan_crawls

        run_id = schedule_ops.run_now(rt, schedule_id, plan_crawls.send)
        if as_json:
            print_json({"run_id": run_id, "schedule_id": schedule_id})
        else:
            console.print(f"sent: run {run_id} (see `crawlsched run status {run_id}`)")


@run_app.command("stop")
def stop(
    run_id: str = typer.Argument(..., help="As shown by `crawlsched run list`."),
    task: str | None = typer.Option(None, help="Stop only this task of the run."),
    children: bool = typer.Option(False, "--children", help="Stop only the run's children."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Stop a run: nothing more is dispatched, crawls stop between jobs, waiting batches go."""
    from crawlsched.flow.stopping import stop_children, stop_run

    with cli_runtime() as rt:
        require_run(rt, run_id)
        if children and task:
            bad_input("give --task or --children, not both")
        notify = _with_broker()
        try:
            summary = (
                stop_children(rt, run_id, notify)
                if children
                else stop_run(rt, run_id, task, notify)
            )
        except CrawlschedError as e:
            bad_input(str(e))
        if not summary.runs:
            bad_input(f"run {run_id!r} has no running children to stop")
        result = {
            "stopping": summary.runs,
            "task": task,
            "released_batches": summary.released_batches,
            "released_jobs": summary.released_jobs,
            "ended": summary.ended,
        }
        if as_json:
            print_json(result)
            return
        what = f"task {task} of " if task else ""
        console.print(
            f"stopping {what}{', '.join(summary.runs)}; released {summary.released_jobs} "
            f"waiting jobs; ended now: {', '.join(summary.ended) or 'none (crawls finish first)'}"
        )


@run_app.command("children")
def children(
    run_id: str = typer.Argument(..., help="A run (multi-process, or one that discovered)."),
    limit: int = typer.Option(50, min=1, max=10_000, help="Discovered jobs to list."),
    skip: int = typer.Option(0, min=0, help="Discovered jobs to skip (paging)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """A run's children: its child runs (multi-process) and the jobs its crawls discovered."""
    with cli_runtime() as rt:
        run = require_run(rt, run_id)
        kids = rt.runs.children_of(run_id)
        found = discovery.children_rows(rt, run_id, limit, skip)
        if as_json:
            _print_json(kids)
            _print_json(found)
            return
        if kids or not found:
            console.print(runs_table(kids, title=f"Child runs of {run_id}: {len(kids)}"))
        if found:
            total = run.get("discovered", 0)
            title = f"Discovered by {run_id}: {skip + 1}-{skip + len(found)} of {total}"
            console.print(discovery.children_table(found, title))


def _job_keys(job: str) -> list[str]:
    """The stored forms a job id given on the command line may have."""
    try:
        decode_id(job)
        return [job]
    except ValueError:
        pass
    keys = [f"str:{job}"]
    if job.isdigit():
        keys.append(f"int:{job}")
    with contextlib.suppress(ValueError):
        keys.append(f"oid:{row_id(job)}")
    return keys


def _history(rt: Runtime, schedule: str | None, job: str | None, limit: int) -> list[dict]:
    if (schedule is None) == (job is None):
        bad_input("give exactly one of --schedule or --job")
    if schedule is not None:
        rows = rt.history.for_schedule(schedule, limit)
        if not rows and rt.schedules.get(schedule) is None:
            bad_input(f"no schedule with id {schedule!r}")
        return rows
    rows = [r for key in _job_keys(job or "") for r in rt.history.for_job(key, limit)]
    if not rows:
        bad_input(f"no task history for job {job!r}")
    return rows


@run_app.command("history")
def history(
    schedule: str | None = typer.Option(None, help="Executions of this schedule's runs."),
    job: str | None = typer.Option(None, help="Executions of this job."),
    limit: int = typer.Option(100, min=1, max=10_000),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Task history: one row per job execution, newest first."""
    with cli_runtime() as rt:
        rows = _history(rt, schedule, job, limit)
        if as_json:
            _print_json(rows)
            return
        table = Table(title=f"Task history ({len(rows)})")
        for column in ("row", "run", "job", "outcome", "items", "account", "node", "took"):
            table.add_column(column)
        for r in rows:
            took = (r["ended_at"] - r["started_at"]).total_seconds()
            fixed = " (corrected)" if r.get("corrections") else ""
            table.add_row(
                str(r["_id"]),
                r["run_id"],
                r["job_id"],
                f"{r['outcome']}{fixed}",
                str(r.get("items_stored", 0)),
                r.get("account") or "-",
                r.get("node") or "-",
                f"{took:.2f}s",
            )
        console.print(table)


@run_app.command("correct")
def correct(
    rows: list[str] = typer.Option([], "--row", help="A history row id (repeatable)."),
    status: str | None = typer.Option(None, help="Correct every row with this outcome."),
    outcome: str | None = typer.Option(None, help="The corrected outcome."),
    error: str | None = typer.Option(None, help="The corrected error text."),
    note: str | None = typer.Option(None, help="A note kept on the row."),
    reason: str = typer.Option(..., help="Why: kept in the row's audit trail."),
    as_json: bool = typer.Option(False, "--json"),
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
    with cli_runtime() as rt:
        try:
            ids = [row_id(r) for r in rows] if rows else None
        except ValueError as e:
            bad_input(str(e))
        if ids is not None:
            missing = sorted(set(map(str, ids)) - set(map(str, rt.history.existing(ids))))
            if missing:
                bad_input(f"no history row {', '.join(missing)}; nothing corrected")
        changed = rt.history.correct(changes, reason.strip(), rt.now(), ids=ids, outcome=status)
        if as_json:
            print_json({"corrected": changed, "set": changes})
        else:
            console.print(f"corrected {changed} rows: {changes}")
