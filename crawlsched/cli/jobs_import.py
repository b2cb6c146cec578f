"""`crawlsched jobs import FILE`: the file is sent as it is read (a progress bar of the bytes
gone), the rows checked and written where the store is; every rejected row comes back with
its reason (`--rejects` keeps them all, here), then a report of what was written."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any, TextIO

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from crawlsched.cli import ops
from crawlsched.cli.common import backend, bad_input, console, print_error

SHOWN_REJECTS = 50
CHUNK = 64 * 1024
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}


class Kind(StrEnum):
    profile = "profile"
    website = "website"


def _chunks(path: Path, progress: Progress, bar: Any) -> Iterator[bytes]:
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk
            progress.advance(bar, len(chunk))


def import_command(
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
    path = Path(given)
    file_format = FORMATS.get(path.suffix.lower())
    if file_format is None:
        known = ", ".join(FORMATS)
        bad_input(f"cannot import {path.name}: unknown extension; use one of {known}")
    if preserve and file_format != "jsonl":
        bad_input("--preserve reads JSON lines (.jsonl, .ndjson) only")
    try:
        size = path.stat().st_size
        path.open("rb").close()
    except OSError as e:
        bad_input(f"cannot read {given}: {e.strerror or e}")
    with contextlib.ExitStack() as stack:
        rejects_out = None
        if rejects is not None:
            try:
                rejects_out = stack.enter_context(Path(rejects).open("w", encoding="utf-8"))
            except OSError as e:
                bad_input(f"--rejects: cannot write {rejects}: {e.strerror or e}")
        report = _send(ctx, path, size, file_format, kind, preserve, rejects_out)
    _finish(report, rejects_out is not None)


def _send(
    ctx: typer.Context,
    path: Path,
    size: int,
    file_format: str,
    kind: Kind | None,
    preserve: bool,
    rejects_out: TextIO | None,
) -> dict[str, Any]:
    shown: list[tuple[int, str]] = []
    columns = (TextColumn("importing {task.description}"), BarColumn(), DownloadColumn())
    columns += (TimeElapsedColumn(),)
    report: dict[str, Any] = {}
    with Progress(*columns, console=console, transient=True) as progress:
        bar = progress.add_task(path.name, total=size)
        lines = backend(ctx).upload(
            ops.JOB_IMPORT,
            _chunks(path, progress, bar),
            format=file_format,
            kind=kind.value if kind else None,
            preserve=preserve or None,
        )
        for line in lines:
            if "rejected" in line:
                rejected = line["rejected"]
                if len(shown) < SHOWN_REJECTS:
                    shown.append((rejected["line"], rejected["reason"]))
                if rejects_out is not None:
                    rejects_out.write(json.dumps(rejected, default=str) + "\n")
            report = line.get("report", report)
    report["shown"] = shown
    return report


def _finish(report: dict[str, Any], kept: bool) -> None:
    import_report(report, kept)
    error = report.get("error")
    if error is not None:
        console.print(stopped_note(report))
        print_error(error["message"])
        raise typer.Exit(1)
    if report["valid"] == 0:
        print_error("no valid row in the file; nothing imported")
        raise typer.Exit(1)


def import_report(report: dict[str, Any], kept: bool) -> None:
    table = Table(title="Import")
    table.add_column("")
    table.add_column("count", justify="right")
    for label, key in (
        ("rows read", "rows"),
        ("valid rows", "valid"),
        ("jobs inserted", "inserted"),
        ("duplicates skipped", "duplicates"),
        ("rows rejected", "rejected"),
    ):
        table.add_row(label, str(report[key]))
    console.print(table)
    shown = report["shown"]
    if not shown:
        return
    rejects = Table(title="Rejected rows")
    rejects.add_column("line", justify="right")
    rejects.add_column("reason", overflow="fold")
    for line, reason in shown:
        rejects.add_row(str(line), reason)
    console.print(rejects)
    if report["rejected"] > len(shown):
        hint = "" if kept else " (--rejects FILE writes them all)"
        console.print(f"… and {report['rejected'] - len(shown)} more rejected rows{hint}")


def stopped_note(report: dict[str, Any]) -> str:
    note = f"import stopped at row {report['rows']}; the jobs counted as inserted above are written"
    error = report["error"]
    jobs, present = error.get("unanswered"), error.get("present")
    if jobs is None:
        return note
    if present is None:
        return f"{note}; the last write ({jobs} jobs) got no answer: its outcome is unknown"
    return (
        f"{note}; the last write ({jobs} jobs) got no answer: read back, the store holds "
        f"{present} of them (new, or there before)"
    )
