"""`crawlsched doctor`: what a sweep would do with the jobs in the database, changing nothing.

Run it on a database before crawlsched has touched it (for example one the old system left):
per job collection, how many jobs would be planned now (per category), how many wait for an
operator (a media or task switched off), how many would be set aside and why, and how many are
not due yet, running, exhausted or already set aside.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import typer
from rich.table import Table

from crawlsched.catalog import JOB_COLLECTIONS, JobState
from crawlsched.cli.common import cli_runtime, console, print_json
from crawlsched.errors import BadJobDocument
from crawlsched.planning.due import parse_due_job
from crawlsched.planning.problems import diagnose
from crawlsched.runtime import Runtime
from crawlsched.store.children import MARKER_FILTER
from crawlsched.store.pipeline import due_filter


def examine(rt: Runtime, collection: str) -> dict[str, Any]:
    """Read-only: the planner's own queries, with their answers counted instead of acted on."""
    now = rt.now()
    store = rt.jobs(collection)
    raw = rt.db[collection]
    fields = rt.target_fields(collection)
    report: dict[str, Any] = {
        "collection": collection,
        "jobs": raw.count_documents({"$nor": [MARKER_FILTER]}),
        "pages_seen": store.pages_seen(),
        "due": raw.count_documents(due_filter(now)),
        "running": raw.count_documents({"state": int(JobState.RUNNING)}),
        "exhausted": raw.count_documents({"exhausted": True}),
        "already_set_aside": raw.count_documents({"problem": {"$ne": None}}),
        "plan": Counter(),
        "wait": Counter(),
        "set_aside": Counter(),
    }
    for problem in map(diagnose, store.audit(now)):
        report["set_aside" if problem.set_aside else "wait"][problem.reason] += 1
    for task in store.due_tasks(now):
        for category, rows in store.categorized(task, now, fields).items():
            for row in rows:
                try:
                    parse_due_job(row, fields)
                except BadJobDocument as e:
                    report["set_aside"][e.reason] += 1
                else:
                    report["plan"][f"{task} / {category.value}"] += 1
    return report


def register(app: typer.Typer) -> None:
    @app.command("doctor")
    def doctor(as_json: bool = typer.Option(False, "--json", help="One JSON object per line.")):
        """What the next sweep would plan, leave waiting or set aside, and why (read-only)."""
        with cli_runtime() as rt:
            reports = [examine(rt, collection) for collection in JOB_COLLECTIONS]
        if as_json:
            for report in reports:
                print_json(report)
            return
        for report in reports:
            seen = f", {report['pages_seen']} pages seen" if report["pages_seen"] else ""
            table = Table(
                title=f"{report['collection']}: {report['jobs']} jobs, {report['due']} due{seen}"
            )
            table.add_column("would", no_wrap=True)
            table.add_column("jobs", justify="right")
            table.add_column("why / where")
            for verdict in ("plan", "wait", "set_aside"):
                for reason, n in sorted(report[verdict].items()):
                    table.add_row(verdict.replace("_", " "), str(n), reason)
            for label in ("running", "exhausted", "already_set_aside"):
                if report[label]:
                    table.add_row("—", str(report[label]), label.replace("_", " "))
            console.print(table)
            planned = sum(report["plan"].values())
            waiting = sum(report["wait"].values())
            aside = sum(report["set_aside"].values())
            console.print(
                f"{report['collection']}: {planned} would be planned, {waiting} wait for an "
                f"operator, {aside} would be set aside"
            )
