"""`crawlsched results MODEL`: what the crawls stored, by natural key, newest first."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from crawlsched.catalog import JOB_COLLECTIONS, MODEL_COLLECTIONS
from crawlsched.cli.common import bad_input, cli_runtime, console, print_json
from crawlsched.cli.runs import require_run
from crawlsched.ids import decode_id
from crawlsched.runtime import Runtime

# The columns a table shows; --json gives every field.
SHOWN = ("key", "first_seen", "last_seen", "run_id")


def _job_id(text: str) -> Any:
    """A job id as `crawlsched run children` and history print it (`str:…`, `oid:…`, `int:…`),
    or bare."""
    try:
        return decode_id(text)
    except ValueError:
        return text


def register(app: typer.Typer) -> None:
    @app.command("results")
    def results(
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
        with cli_runtime() as rt:
            job_id = _job_id(job) if job is not None else None
            docs = rt.results.find(model, run_id=run, job_id=job_id, limit=limit, skip=skip)
            if not docs:
                _require_known(rt, model, run, job, job_id)
            if as_json:
                for doc in docs:
                    doc.pop("_id", None)
                    print_json(doc)
                return
            table = Table(title=f"{model}: {len(docs)} shown (skipped {skip})")
            for column in SHOWN:
                table.add_column(column, overflow="fold")
            for doc in docs:
                table.add_row(*(_text(doc.get(c)) for c in SHOWN))
            console.print(table)


def _require_known(rt: Runtime, model: str, run: str | None, job: str | None, job_id: Any) -> None:
    """Nothing found: say so if the run or job named does not exist (exit 2), rather than
    print an empty table as if it did."""
    if run is not None:
        require_run(rt, run)
    if job is not None:
        stored = rt.results.find(model, job_id=job_id, limit=1)
        if not stored and not any(
            rt.db[c].count_documents({"_id": job_id}, limit=1) for c in JOB_COLLECTIONS
        ):
            bad_input(f"no job with id {job!r}")


def _iso(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _text(value: Any) -> str:
    return "-" if value is None else _iso(value)
