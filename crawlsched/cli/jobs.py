"""`crawlsched jobs …`: add one target, import a file of them, and look at one job, problems
and counts."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from enum import StrEnum
from typing import Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from crawlsched.catalog import JOB_COLLECTIONS, STATE_NAMES, JobState
from crawlsched.cli.common import (
    cli_runtime,
    console,
    invocation,
    print_error,
    print_json,
)
from crawlsched.cli.jobs_add import add_app
from crawlsched.cli.jobs_import import JobImporter, count_lines, import_report, stopped_note
from crawlsched.errors import BadJobInput
from crawlsched.flow import job_ops
from crawlsched.import_files import JSON_LINES_SUFFIXES, parse_import_file
from crawlsched.planning.problems import diagnose
from crawlsched.runtime import Runtime

app = typer.Typer(no_args_is_help=True)
app.add_typer(add_app, name="add")


class Kind(StrEnum):
    profile = "profile"
    website = "website"


# -- importing a file ------------------------------------------------------------------------


@app.command("import")
def import_jobs(
    ctx: typer.Context,
    given: str = typer.Argument(
        ..., metavar="FILE", help="JSON lines (.jsonl, .ndjson) or CSV (.csv)."
    ),
    kind: Kind | None = typer.Option(None, help="Kind of rows that don't say (column `kind`)."),
    rejects: str | None = typer.Option(
        None, help="Write every rejected line and its reason here, as JSON lines."
    ),
    preserve: bool = typer.Option(
        False,
        "--preserve",
        help="Rows are job documents (e.g. a mongoexport of another database, JSON lines): "
        "keep _id, state, enabled, execution_date, modified_at, human_validation, certitude, "
        "attempt_count and every other field as they are.",
    ),
) -> None:
    """Add many jobs from a file; duplicates are skipped, bad rows reported with their reason.

    Columns/keys: kind, media, target, url, tasks (CSV: separated by `;`), interval_s, one_off,
    human_validation, certitude, start_at. With --preserve, one job document per line: kind
    (or --kind), media_name, task, and the document's own fields. Exit 0 if any row was valid,
    1 if none, 2 if the file can't be read.
    """
    caller = invocation(ctx)
    file = caller.reads(given, "FILE")
    rejects_path = caller.writes(rejects, "--rejects") if rejects is not None else None
    if preserve and file.suffix.lower() not in JSON_LINES_SUFFIXES:
        print_error("--preserve reads JSON lines (.jsonl, .ndjson) only")
        raise typer.Exit(2)
    try:
        rows = parse_import_file(file)
        total = count_lines(file)
    except (OSError, BadJobInput) as e:
        print_error(f"cannot read {given}: {e}")
        raise typer.Exit(2) from None
    rejects_out = rejects_path.open("w", encoding="utf-8") if rejects_path else None
    imp: JobImporter | None = None
    try:
        with cli_runtime() as rt:
            imp = JobImporter(rt, kind.value if kind else None, rejects_out, preserve)
            columns = (
                *Progress.get_default_columns()[:1],
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
            )
            with Progress(*columns, console=console, transient=True) as progress:
                bar = progress.add_task(f"importing {escape(file.name)}", total=total)
                for line, raw in rows:
                    imp.add(line, raw)
                    progress.update(bar, completed=line)
                imp.finish()
                progress.update(bar, completed=total)
    except (typer.Exit, SystemExit):
        # The error is already said; say what was written before it, so a re-run is safe to
        # plan (rows already inserted are skipped as duplicates).
        if imp is not None and imp.rows:
            import_report(imp)
            console.print(stopped_note(imp))
        raise
    finally:
        if rejects_out is not None:
            rejects_out.close()
    import_report(imp)
    if imp.valid == 0:
        print_error("no valid row in the file; nothing imported")
        raise typer.Exit(1)


# -- looking at jobs ---------------------------------------------------------------------------


def _problem_rows(rt: Runtime, now: datetime) -> Iterator[dict[str, Any]]:
    for collection in JOB_COLLECTIONS:
        store = rt.jobs(collection)
        for doc in store.problems():
            problem = doc.get("problem")
            reason = problem.get("reason") if isinstance(problem, dict) else str(problem)
            yield {
                "collection": collection,
                "job_id": str(doc["_id"]),
                "target": doc.get("target"),
                "task": doc.get("task"),
                "reason": reason,
                "status": "set aside",
            }
        waiting = [(row, diagnose(row)) for row in store.audit(now)]
        waiting = [(row, p) for row, p in waiting if not p.set_aside]
        for row, p in waiting:
            yield {
                "collection": collection,
                "job_id": str(p.job_id),
                "target": row.get("target"),
                "task": row.get("task"),
                "reason": p.reason,
                "status": "waiting",
            }


@app.command("problems")
def problems(
    as_json: bool = typer.Option(False, "--json", help="One JSON document per line."),
    limit: int = typer.Option(100, min=1, help="Rows shown in the table (--json shows all)."),
) -> None:
    """Jobs set aside (fix them, then retry-problems) and jobs waiting on an operator."""
    with cli_runtime() as rt:
        rows = list(_problem_rows(rt, rt.now()))
    if as_json:
        for row in rows:
            print_json(row)
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
def retry_problems() -> None:
    """Clear the problem flag of set-aside jobs: the next sweep audits them again."""
    with cli_runtime() as rt:
        cleared = {c: rt.jobs(c).clear_problems() for c in JOB_COLLECTIONS}
    detail = ", ".join(f"{c}: {n}" for c, n in cleared.items())
    console.print(f"cleared {sum(cleared.values())} set-aside job(s) ({detail})")


@app.command("summary")
def summary(as_json: bool = typer.Option(False, "--json")) -> None:
    """How many jobs each collection holds, by state."""
    states = [s.name.lower() for s in JobState]
    with cli_runtime() as rt:
        counts = {c: rt.jobs(c).summary() for c in JOB_COLLECTIONS}
    if as_json:
        for collection, by_state in counts.items():
            named = {
                STATE_NAMES.get(int(k), k) if k.isdigit() else k: n for k, n in by_state.items()
            }
            print_json({"collection": collection, **named, "total": sum(by_state.values())})
        return
    table = Table(title="Jobs by state")
    for column in ("collection", *states, "other", "total"):
        table.add_column(column, justify="left" if column == "collection" else "right")
    for collection, by_state in counts.items():
        named = {str(int(s)): by_state.get(str(int(s)), 0) for s in JobState}
        other = sum(n for key, n in by_state.items() if key not in named)
        table.add_row(
            collection, *map(str, named.values()), str(other), str(sum(by_state.values()))
        )
    console.print(table)


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g}{unit} ({seconds:.0f} s)"
    return f"{seconds:.0f} s"


@app.command("list")
def list_jobs(
    collection: str = typer.Argument(..., help=f"One of {', '.join(JOB_COLLECTIONS)}."),
    state: str | None = typer.Option(None, "--state", help="pending, running, failed or done."),
    task: str | None = typer.Option(None, "--task"),
    target: str | None = typer.Option(None, "--target", help="Exactly this target."),
    limit: int = typer.Option(50, "--limit", min=1, max=1000),
    skip: int = typer.Option(0, "--skip", min=0),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
) -> None:
    """Jobs of a collection, in id order, filtered by state, task or target."""
    with cli_runtime() as rt:
        jobs = job_ops.find_jobs(rt, collection, state, task, target, None, limit, skip)
    if as_json:
        for job in jobs:
            print_json(job)
        return
    table = Table(title=f"Jobs in {collection}")
    for column in ("job", "state", "task", "target", "next crawl"):
        table.add_column(column, overflow="fold")
    for job in jobs:
        table.add_row(
            job["job_id"],
            job["state"],
            str(job.get("task", "-")),
            str(job.get("target", "-")),
            _when(job.get("execution_date")),
        )
    console.print(table)


@app.command("remove")
def remove(
    collection: str = typer.Argument(..., help=f"One of {', '.join(JOB_COLLECTIONS)}."),
    job_id: str = typer.Argument(..., help="An encoded job id (oid:…, int:…, str:…)."),
) -> None:
    """Delete a job no crawl holds (a job being crawled is refused, exit 2)."""
    with cli_runtime() as rt:
        job = job_ops.remove_job(rt, collection, job_id)
    console.print(f"removed {collection} {job['job_id']} ({job.get('target', '-')})")


@app.command("show")
def show(
    collection: str = typer.Argument(..., help=f"One of {', '.join(JOB_COLLECTIONS)}."),
    job_id: str = typer.Argument(..., help="An encoded job id (oid:…, int:…, str:…)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
) -> None:
    """One job: its state, its configured and current recrawl interval, and the evidence."""
    with cli_runtime() as rt:
        job = job_ops.get_job(rt, collection, job_id)
    if as_json:
        print_json(job)
        return
    recrawl = job["recrawl"]
    last = recrawl["last_items"]
    bounds = (
        f"{_duration(recrawl['min_interval_s'])} to {_duration(recrawl['max_interval_s'])}"
        if recrawl["mode"] == "adaptive"
        else "-"
    )
    rows = [
        ("job", f"{job['collection']} {job['job_id']}"),
        ("target", str(job.get("target", "-"))),
        ("task", str(job.get("task", "-"))),
        ("state", job["state"]),
        ("recrawl", recrawl["mode"] + (f" ({recrawl['method']})" if recrawl.get("method") else "")),
        ("configured interval", _duration(recrawl["configured_interval_s"])),
        ("current interval", _duration(recrawl["current_interval_s"])),
        ("bounds", bounds),
        ("estimated change every", _duration(recrawl.get("estimated_change_every_s"))),
        ("crawls counted", str(recrawl["visits"])),
        ("crawls that found a change", str(recrawl["changes"])),
        ("last crawl found", ", ".join(f"{n} {k}" for k, n in sorted(last.items())) or "-"),
        ("interval updated", _when(recrawl["updated_at"])),
        ("next crawl", _when(recrawl["next_at"])),
    ]
    table = Table(title="Job", show_header=False)
    table.add_column("field")
    table.add_column("value", overflow="fold")
    for label, value in rows:
        table.add_row(label, value)
    console.print(table)


def _when(moment: Any) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if isinstance(moment, datetime) else "-"
