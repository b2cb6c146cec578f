"""`crawlsched jobs …`: look at jobs (a collection's, one, their counts, their problems) and
remove one. Adding one is `jobs_add.py`; importing a file, `jobs_import.py`."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from crawlsched.catalog import JOB_COLLECTIONS, STATE_NAMES, JobState
from crawlsched.cli import ops
from crawlsched.cli.common import backend, bad_input, console, print_json, print_lines
from crawlsched.cli.jobs_add import add_app
from crawlsched.cli.jobs_import import import_command
from crawlsched.cli.text import duration, when

app = typer.Typer(no_args_is_help=True)
app.add_typer(add_app, name="add")
app.command("import")(import_command)

COLLECTION = typer.Argument(..., help=f"One of {', '.join(JOB_COLLECTIONS)}.")
JOB_ID = typer.Argument(..., help="An encoded job id (oid:…, int:…, str:…).")


def _target(job: dict[str, Any]) -> str:
    """What a job crawls: its target, or a discovered page's URL (it has no target)."""
    return str(job.get("target") or job.get("url") or "-")


@app.command("problems")
def problems(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="One JSON document per line."),
    limit: int = typer.Option(100, min=1, help="Rows shown in the table (--json shows all)."),
) -> None:
    """Jobs set aside (fix them, then retry-problems) and jobs waiting on an operator."""
    rows = backend(ctx).items(ops.PROBLEMS, 10_000_000)
    if as_json:
        print_lines(rows)
        return
    if not rows:
        console.print("no problems: every enabled job can be planned")
        return
    table = Table(title="Job problems")
    for column in ("collection", "job id", "target", "task", "reason", "status"):
        table.add_column(column, overflow="fold")
    for row in rows[:limit]:
        table.add_row(
            *(str(row[k]) for k in ("collection", "job_id", "target", "task")),
            row["reason"],
            row["status"],
        )
    console.print(table)
    if len(rows) > limit:
        console.print(f"… and {len(rows) - limit} more (--limit, or --json for all)")
    aside = sum(1 for r in rows if r["status"] == "set aside")
    console.print(
        f"{aside} set aside (fix the job, then `crawlsched jobs retry-problems`); "
        f"{len(rows) - aside} waiting on an operator (enable the media or task)"
    )


@app.command("retry-problems")
def retry_problems(ctx: typer.Context) -> None:
    """Clear the problem flag of set-aside jobs: the next sweep audits them again."""
    cleared = backend(ctx).call(ops.PROBLEMS_RETRY)["cleared"]
    detail = ", ".join(f"{c}: {n}" for c, n in cleared.items())
    console.print(f"cleared {sum(cleared.values())} set-aside job(s) ({detail})")


@app.command("summary")
def summary(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """How many jobs each collection holds, by state."""
    rows = backend(ctx).call(ops.JOB_COUNTS)["items"]
    if as_json:
        print_lines(rows)
        return
    states = [s.name.lower() for s in JobState]
    table = Table(title="Jobs by state")
    for column in ("collection", *states, "other", "total"):
        table.add_column(column, justify="left" if column == "collection" else "right")
    for row in rows:
        named = [row.get(state, 0) for state in states]
        other = row["total"] - sum(named)
        table.add_row(row["collection"], *map(str, named), str(other), str(row["total"]))
    console.print(table)


@app.command("list")
def list_jobs(
    ctx: typer.Context,
    collection: str = COLLECTION,
    state: str | None = typer.Option(None, "--state", help="pending, running, failed or done."),
    task: str | None = typer.Option(None, "--task"),
    target: str | None = typer.Option(None, "--target", help="Exactly this target (or URL)."),
    limit: int = typer.Option(50, "--limit", min=1, max=1000),
    skip: int = typer.Option(0, "--skip", min=0),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
) -> None:
    """Jobs of a collection, filtered by state, task or target: the jobs users added first, in
    id order, then the pages runs discovered."""
    if state is not None and state not in STATE_NAMES.values():
        known = ", ".join(STATE_NAMES.values())
        bad_input(f"unknown job state {state!r}; known: {known}")
    page = backend(ctx).call(
        ops.JOBS, collection=collection, state=state, task=task, target=target,
        limit=limit, offset=skip,
    )  # fmt: skip
    jobs = page["items"]
    if as_json:
        print_lines(jobs)
        return
    shown = f"{skip + 1}-{skip + len(jobs)}" if jobs else "none"
    table = Table(title=f"Jobs in {collection}: {shown} of {page['total']}")
    for column in ("job", "state", "task", "target", "next crawl"):
        table.add_column(column, overflow="fold")
    for job in jobs:
        table.add_row(
            job["job_id"],
            job["state"],
            str(job.get("task", "-")),
            _target(job),
            when(job.get("execution_date"), " UTC"),
        )
    console.print(table)
    if page.get("next_offset") is not None:
        console.print(f"more: --skip {page['next_offset']}")


@app.command("remove")
def remove(ctx: typer.Context, collection: str = COLLECTION, job_id: str = JOB_ID) -> None:
    """Delete a job no crawl holds (a job being crawled is refused, exit 2)."""
    job = backend(ctx).call(ops.JOB_REMOVE, collection=collection, job_id=job_id)
    console.print(f"removed {collection} {job['job_id']} ({_target(job)})")


@app.command("show")
def show(
    ctx: typer.Context,
    collection: str = COLLECTION,
    job_id: str = JOB_ID,
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
) -> None:
    """One job: its state, its configured and current recrawl interval, and the evidence."""
    job = backend(ctx).call(ops.JOB, collection=collection, job_id=job_id)
    if as_json:
        print_json(job)
        return
    recrawl = job["recrawl"]
    last = recrawl["last_items"]
    bounds = (
        f"{duration(recrawl['min_interval_s'])} to {duration(recrawl['max_interval_s'])}"
        if recrawl["mode"] == "adaptive"
        else "-"
    )
    rows = [
        ("job", f"{job['collection']} {job['job_id']}"),
        ("target", _target(job)),
        ("task", str(job.get("task", "-"))),
        ("state", job["state"]),
        ("recrawl", recrawl["mode"] + (f" ({recrawl['method']})" if recrawl.get("method") else "")),
        ("configured interval", duration(recrawl["configured_interval_s"])),
        ("current interval", duration(recrawl["current_interval_s"])),
        ("bounds", bounds),
        ("estimated change every", duration(recrawl.get("estimated_change_every_s"))),
        ("crawls counted", str(recrawl["visits"])),
        ("crawls that found a change", str(recrawl["changes"])),
        ("last crawl found", ", ".join(f"{n} {k}" for k, n in sorted(last.items())) or "-"),
        ("interval updated", when(recrawl["updated_at"], " UTC")),
        ("next crawl", when(recrawl["next_at"], " UTC")),
    ]
    if job.get("depth") is not None:
        rows.insert(2, ("depth", f"{job['depth']} (found by run {job.get('scope_run', '?')})"))
    table = Table(title="Job", show_header=False)
    table.add_column("field")
    table.add_column("value", overflow="fold")
    for label, value in rows:
        table.add_row(label, value)
    console.print(table)
