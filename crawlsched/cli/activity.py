"""`crawlsched activity` (the event feed) and `crawlsched store stats` (counts across the
system; `stats` is its old spelling)."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from crawlsched.cli import ops
from crawlsched.cli.common import backend, console, print_json, print_lines
from crawlsched.cli.server import store_app
from crawlsched.cli.text import when


def register(app: typer.Typer) -> None:
    @app.command("activity")
    def activity(
        ctx: typer.Context,
        limit: int = typer.Option(50, min=1, max=10_000),
        run: str | None = typer.Option(None, help="Only the events of this run."),
        as_json: bool = typer.Option(False, "--json"),
    ) -> None:
        """The activity feed: run and schedule events, newest first."""
        api = backend(ctx)
        events = api.items(ops.ACTIVITY, limit, run_id=run)
        if run is not None and not events:
            api.call(ops.RUN, run_id=run)  # an unknown run: one line, exit 2
        if as_json:
            print_lines(events)
            return
        table = Table(title=f"Activity ({len(events)})")
        for column in ("at", "event", "subject"):
            table.add_column(column)
        for e in events:
            subject = e.get("run_id") or e.get("schedule_id") or "-"
            table.add_row(when(e["at"], ""), e["event"], str(subject))
        console.print(table)

    @store_app.command("stats")
    def stats(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
        """Runs, jobs, executions, waiting batches, webhooks and events, counted."""
        figures = backend(ctx).call(ops.STATS)
        if as_json:
            print_json(figures)
            return
        table = Table(title="Stats", show_header=False)
        table.add_column("figure", no_wrap=True)
        table.add_column("of")
        table.add_column("counts")
        for name, value in figures.items():
            for of, counts in _breakdown(value):
                table.add_row(name.replace("_", " "), of, counts)
        console.print(table)

    app.command("stats", hidden=True, help="Old spelling of `store stats`.")(stats)


def _breakdown(value: Any) -> list[tuple[str, str]]:
    """A figure as (of what, counts) rows: a number; counts by name; or counts by name per
    collection (jobs by state)."""
    if not isinstance(value, dict):
        return [("", str(value))]
    if all(isinstance(v, dict) for v in value.values()) and value:
        return [(key, _counts(v)) for key, v in value.items()]
    return [("", _counts(value) or "-")]


def _counts(counts: dict[str, Any]) -> str:
    return ", ".join(f"{key} {n}" for key, n in counts.items())
