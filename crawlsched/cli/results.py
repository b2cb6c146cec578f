"""`crawlsched results MODEL`: what the crawls stored, by natural key, newest first."""

from __future__ import annotations

import typer
from rich.table import Table

from crawlsched.catalog import JOB_COLLECTIONS, MODEL_COLLECTIONS
from crawlsched.cli import ops
from crawlsched.cli.backend import Backend, CommandFailed
from crawlsched.cli.common import backend, bad_input, console, print_lines

# The columns a table shows; --json gives every field.
SHOWN = ("key", "first_seen", "last_seen", "run_id")


def register(app: typer.Typer) -> None:
    @app.command("results")
    def results(
        ctx: typer.Context,
        model: str = typer.Argument(..., help=f"One of: {', '.join(MODEL_COLLECTIONS)}."),
        run: str | None = typer.Option(None, "--run", help="Only what this run stored."),
        job: str | None = typer.Option(None, "--job", help="Only what this job stored."),
        limit: int = typer.Option(50, min=1, max=10_000),
        skip: int = typer.Option(0, min=0, help="Skip this many (paging)."),
        as_json: bool = typer.Option(False, "--json", help="One JSON document per line."),
    ) -> None:
        """Stored results of a data model (upserted by natural key: a re-crawl updates)."""
        if model not in MODEL_COLLECTIONS:
            bad_input(f"unknown model {model!r}; known: {', '.join(MODEL_COLLECTIONS)}")
        api = backend(ctx)
        docs = api.items(ops.RESULTS, limit, model=model, run_id=run, job_id=job, offset=skip)
        if not docs:
            _require_known(api, run, job)
        if as_json:
            print_lines(docs)
            return
        table = Table(title=f"{model}: {len(docs)} shown (skipped {skip})")
        for column in SHOWN:
            table.add_column(column, overflow="fold")
        for doc in docs:
            table.add_row(*("-" if doc.get(c) is None else str(doc[c]) for c in SHOWN))
        console.print(table)


def _require_known(api: Backend, run: str | None, job: str | None) -> None:
    """Nothing found: say so if the run or job named does not exist (exit 2), rather than
    print an empty table as if it did."""
    if run is not None:
        api.call(ops.RUN, run_id=run)
    if job is not None and not _job_exists(api, job):
        bad_input(f"no job with id {job!r}")


def _job_exists(api: Backend, job: str) -> bool:
    encoded = job if job.startswith(("oid:", "int:", "str:")) else f"str:{job}"
    for collection in JOB_COLLECTIONS:
        try:
            api.call(ops.JOB, collection=collection, job_id=encoded)
        except CommandFailed as e:
            if e.code != 2:
                raise
            continue
        return True
    return False
