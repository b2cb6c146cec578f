"""`crawlsched activity` (the event feed) and `crawlsched stats` (counts across the system)."""

from __future__ import annotations

import json
from typing import Any

import typer
from pymongo import DESCENDING
from rich.table import Table

from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.cli.common import cli_runtime, console
from crawlsched.runtime import Runtime


def _counts(rt: Runtime, collection: str, field: str) -> dict[str, int]:
    rows = rt.db[collection].aggregate([{"$group": {"_id": f"${field}", "n": {"$sum": 1}}}])
    return {str(row["_id"]): row["n"] for row in rows}


def gather_stats(rt: Runtime) -> dict[str, Any]:
    return {
        "runs_by_state": _counts(rt, "runs", "state"),
        "runs_by_result": _counts(rt, "runs", "result"),
        "jobs_by_state": {c: rt.jobs(c).summary() for c in JOB_COLLECTIONS},
        "executions_by_outcome": rt.history.outcome_totals(),
        "waiting_batches": len(rt.waiting.all()),
        "webhooks_by_state": _counts(rt, "webhook_deliveries", "state"),
        "events_by_name": _counts(rt, "activity", "event"),
    }


def register(app: typer.Typer) -> None:
    @app.command("activity")
    def activity(
        limit: int = typer.Option(50, min=1, max=10_000),
        run: str | None = typer.Option(None, help="Only the events of this run."),
        as_json: bool = typer.Option(False, "--json"),
    ) -> None:
        """The activity feed: run and schedule events, newest first."""
        with cli_runtime() as rt:
            query = {"run_id": run} if run else {}
            events = list(
                rt.db.activity.find(query)
                .sort([("at", DESCENDING), ("_id", DESCENDING)])
                .limit(limit)
            )
            if as_json:
                for event in events:
                    print(json.dumps(event, default=str))
                return
            table = Table(title=f"Activity ({len(events)})")
            for column in ("at", "event", "subject"):
                table.add_column(column)
            for e in events:
                subject = e.get("run_id") or e.get("schedule_id") or "-"
                table.add_row(e["at"].strftime("%Y-%m-%d %H:%M:%S"), e["event"], str(subject))
            console.print(table)

    @app.command("stats")
    def stats(as_json: bool = typer.Option(False, "--json")) -> None:
        """Runs, jobs, executions, waiting batches, webhooks and events, counted."""
        with cli_runtime() as rt:
            figures = gather_stats(rt)
            if as_json:
                print(json.dumps(figures))
                return
            for name, value in figures.items():
                console.print(f"{name}: {json.dumps(value)}")
