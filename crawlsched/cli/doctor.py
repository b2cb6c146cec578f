"""`crawlsched doctor`: what a sweep would do with the jobs in the database, changing nothing.

Run it on a database before crawlsched has touched it (for example one the old system left):
per job collection, how many jobs would be planned now (per category), how many wait for an
operator (a media or task switched off), how many would be set aside and why, and how many are
not due yet, running, exhausted or already set aside.
"""

from __future__ import annotations

import typer
from rich.table import Table

from crawlsched.cli import ops
from crawlsched.cli.common import backend, console, print_lines


def register(app: typer.Typer) -> None:
    @app.command("doctor")
    def doctor(
        ctx: typer.Context,
        as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
    ) -> None:
        """What the next sweep would plan, leave waiting or set aside, and why (read-only)."""
        reports = backend(ctx).call(ops.DOCTOR)["items"]
        if as_json:
            print_lines(reports)
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
