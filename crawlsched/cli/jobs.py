"""`crawlsched jobs …`: add one target, import a file of them, and look at one job, problems
and counts."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TextIO

import pymongo.errors
import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from crawlsched.catalog import JOB_COLLECTIONS, STATE_NAMES, TARGET_KINDS, JobState
from crawlsched.cli.common import (
    UNANSWERED_WRITE_ERRORS,
    cli_runtime,
    console,
    invocation,
    labelled,
    print_error,
    print_json,
)
from crawlsched.errors import BadJobInput, WriteOutcomeUnknown
from crawlsched.flow import job_ops
from crawlsched.jobs_input import (
    DEFAULT_WEBSITE_MEDIA,
    JSON_LINES_SUFFIXES,
    MAX_DEPTH,
    MAX_PAGES,
    JobInput,
    build_job_docs,
    from_extended_json,
    job_input_from_row,
    parse_import_file,
    preserved_job_doc,
)
from crawlsched.planning.problems import diagnose
from crawlsched.runtime import Runtime

app = typer.Typer(no_args_is_help=True)
add_app = typer.Typer(help="Schedule the tasks of one profile or website.", no_args_is_help=True)
app.add_typer(add_app, name="add")

IMPORT_CHUNK = 1000  # job documents per bulk write
SHOWN_REJECTS = 50
RERUN_IS_SAFE = (
    "Running the same import again is safe: jobs already in the store are skipped as duplicates."
)


class Pagination(StrEnum):
    next_link = "next_link"
    page_param = "page_param"


class Kind(StrEnum):
    profile = "profile"
    website = "website"


Tasks = Annotated[
    list[str] | None,
    typer.Option("--task", "-t", help="A task to schedule (repeat); default: the kind's defaults."),
]
Interval = Annotated[
    int | None,
    typer.Option("--interval", min=1, help="Seconds between crawls (default: daily)."),
]
Once = Annotated[bool, typer.Option("--once", help="Crawl once instead of on a recurring basis.")]
Validated = Annotated[
    bool, typer.Option("--validated", help="A human validated the target: plan it first.")
]
Certitude = Annotated[
    float, typer.Option("--certitude", min=0.0, max=1.0, help="Priority among unvalidated jobs.")
]
StartAt = Annotated[
    str | None,
    typer.Option("--start-at", help="First run, ISO 8601 (naive means UTC); default: now."),
]


# -- adding one target -----------------------------------------------------------------------


def _every(seconds: int | None) -> str:
    if seconds is None:
        return "once"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds % size == 0:
            return f"every {seconds // size}{unit}"
    return f"every {seconds}s"


def _add(fields: dict[str, Any]) -> None:
    if fields.get("interval_s") is not None and fields.get("one_off"):
        raise typer.BadParameter("--interval and --once exclude each other")
    with cli_runtime() as rt:
        added = job_ops.add_target(rt, fields)
        first = added.docs[0]
        console.print(
            f"{added.media['media_name']} {first['target']}: "
            f"{', '.join(d['task'] for d in added.docs)} "
            f"({_every(first['interval_s'])}, first at {first['execution_date']:%Y-%m-%d %H:%M} "
            f"UTC) in {added.collection}: {added.inserted} new job(s)"
        )
        bounds = [
            f"links {first['max_depth']} deep" if "max_depth" in first else "",
            f"at most {first['max_pages']} pages a run" if "max_pages" in first else "",
        ]
        if any(bounds):
            console.print(f"discovery: {', '.join(b for b in bounds if b)}")
        if added.skipped:
            console.print(f"{len(added.skipped)} already scheduled: skipped, not duplicated")
        _warn_if_off(added.media, added.disabled_tasks)


def _warn_if_off(media: dict[str, Any], off: list[str]) -> None:
    if media.get("enabled") is False:
        console.print(
            labelled(
                "note:",
                "yellow",
                f"media {media['media_name']} is disabled; these jobs wait until it is enabled",
            )
        )
    elif off:
        console.print(
            labelled(
                "note:",
                "yellow",
                f"task(s) {', '.join(off)} disabled for {media['media_name']}; "
                "those jobs wait until enabled",
            )
        )


@add_app.command("profile")
def add_profile(
    media: str = typer.Argument(..., help="Media name, e.g. twitter."),
    handle: str = typer.Argument(..., help="Profile handle, e.g. alice (a leading @ is dropped)."),
    task: Tasks = None,
    url: str | None = typer.Option(None, help="Profile URL, when the media can't build it."),
    interval: Interval = None,
    once: Once = False,
    validated: Validated = False,
    certitude: Certitude = 0.5,
    start_at: StartAt = None,
) -> None:
    """Schedule a profile: `profile` plus publication by default (or the --task ones)."""
    _add(
        {
            "kind": "profile",
            "media": media,
            "target": handle,
            "url": url,
            "tasks": task,
            "interval_s": interval,
            "one_off": once,
            "human_validation": validated,
            "certitude": certitude,
            "start_at": start_at,
        }
    )


@add_app.command("website")
def add_website(
    url: str = typer.Argument(..., help="The site's http(s) URL."),
    media: str = typer.Option(DEFAULT_WEBSITE_MEDIA, help="Media whose driver crawls it."),
    task: Tasks = None,
    interval: Interval = None,
    once: Once = False,
    validated: Validated = False,
    certitude: Certitude = 0.5,
    start_at: StartAt = None,
    depth: int | None = typer.Option(
        None,
        "--depth",
        min=0,
        max=MAX_DEPTH,
        help="Follow links this deep from the URL (over the media's max_depth).",
    ),
    max_pages: int | None = typer.Option(
        None,
        "--max-pages",
        min=0,
        max=MAX_PAGES,
        help="At most this many pages discovered from the URL per run.",
    ),
    pagination: Pagination | None = typer.Option(
        None, "--pagination", help="How the website driver walks list pages."
    ),
    page_param: str | None = typer.Option(
        None, "--page-param", help="The page number's query parameter (page_param; 'page')."
    ),
) -> None:
    """Schedule a website: article by default (or the --task ones)."""
    _add(
        {
            "kind": "website",
            "media": media,
            "target": url,
            "tasks": task,
            "interval_s": interval,
            "one_off": once,
            "human_validation": validated,
            "certitude": certitude,
            "start_at": start_at,
            "max_depth": depth,
            "max_pages": max_pages,
            "pagination": pagination.value if pagination else None,
            "page_param": page_param,
        }
    )


# -- importing a file ------------------------------------------------------------------------


class _Importer:
    """Validates rows one by one and writes their jobs in bulks of IMPORT_CHUNK per collection."""

    def __init__(
        self, rt: Runtime, kind: str | None, rejects: TextIO | None, preserve: bool = False
    ) -> None:
        self.rt, self.kind, self.rejects_out, self.preserve = rt, kind, rejects, preserve
        self.now = rt.now()
        self.rows = self.valid = self.inserted = self.duplicates = self.rejected = 0
        self.shown: list[tuple[int, str]] = []
        self.pending: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.media: dict[str, tuple[dict[str, Any], set[str]] | BadJobInput] = {}
        # (jobs in the write MongoDB never answered, how many of them it holds: None unknown)
        self.unanswered: tuple[int, int | None] | None = None

    def _media_of(self, job: JobInput) -> tuple[dict[str, Any], set[str]]:
        return self._media_named(job.media_name)

    def _media_named(self, name: str) -> tuple[dict[str, Any], set[str]]:
        if name not in self.media:
            try:
                row, task_rows = job_ops.media_and_tasks(self.rt, name)
                self.media[name] = (row, set(task_rows))
            except BadJobInput as e:
                self.media[name] = e
        found = self.media[name]
        if isinstance(found, BadJobInput):
            raise found
        return found

    def add(self, line: int, raw: dict[str, Any] | Exception) -> None:
        self.rows += 1
        if isinstance(raw, Exception):
            self._reject(line, str(raw), None)
            return
        try:
            if self.preserve:
                collection, docs = self._preserved(raw)
            else:
                job = job_input_from_row(raw, self.kind)
                docs = build_job_docs(job, *self._media_of(job), self.now, self.rt.allowed_networks)
                collection = TARGET_KINDS[job.kind].collection
        except BadJobInput as e:
            self._reject(line, str(e), raw)
            return
        self.valid += 1
        self.pending[collection].extend(docs)
        while len(self.pending[collection]) >= IMPORT_CHUNK:
            self._flush(collection, IMPORT_CHUNK)

    def _preserved(self, raw: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        try:
            row = from_extended_json(raw)
        except (ValueError, TypeError) as e:
            raise BadJobInput(f"not valid extended JSON: {e}") from None
        kind = row.get("kind") or self.kind
        if kind not in TARGET_KINDS:
            raise BadJobInput(f"kind must be one of {sorted(TARGET_KINDS)} (column or --kind)")
        name = row.get("media_name") or row.get("media")
        if not isinstance(name, str) or not name:
            name = DEFAULT_WEBSITE_MEDIA if kind == "website" else ""
        if not name:
            raise BadJobInput("a profile job needs media_name (or media)")
        doc = preserved_job_doc(row, *self._media_named(name), self.now)
        return TARGET_KINDS[kind].collection, [doc]

    def finish(self) -> None:
        for collection in list(self.pending):
            while self.pending[collection]:
                self._flush(collection, IMPORT_CHUNK)

    def _flush(self, collection: str, size: int) -> None:
        chunk, self.pending[collection] = (
            self.pending[collection][:size],
            self.pending[collection][size:],
        )
        store = self.rt.jobs(collection)
        try:
            if self.preserve:
                inserted, skipped_count = store.insert_preserved(chunk)
            else:
                inserted, skipped = store.insert_new(chunk)
                skipped_count = len(skipped)
        except pymongo.errors.ServerSelectionTimeoutError:
            raise  # no server to send it to: it never left (MongoDB unreachable)
        except UNANSWERED_WRITE_ERRORS as e:
            # The write may have been applied: read back what the store holds of it, if the
            # store answers that.
            self.unanswered = (len(chunk), self._read_back(store, chunk))
            raise WriteOutcomeUnknown(f"a write of {len(chunk)} jobs", e, RERUN_IS_SAFE) from None
        self.inserted += inserted
        self.duplicates += skipped_count

    @staticmethod
    def _read_back(store, chunk: list[dict[str, Any]]) -> int | None:
        try:
            return store.count_present(chunk)
        except pymongo.errors.PyMongoError:
            return None

    def _reject(self, line: int, reason: str, raw: dict[str, Any] | None) -> None:
        self.rejected += 1
        if len(self.shown) < SHOWN_REJECTS:
            self.shown.append((line, reason))
        if self.rejects_out is not None:
            record = {"line": line, "reason": reason, "row": raw}
            self.rejects_out.write(json.dumps(record, default=str) + "\n")


def _count_lines(path: Path) -> int:
    lines, last = 0, b"\n"
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


def _import_report(imp: _Importer) -> None:
    table = Table(title="Import")
    table.add_column("")
    table.add_column("count", justify="right")
    for label, value in (
        ("rows read", imp.rows),
        ("valid rows", imp.valid),
        ("jobs inserted", imp.inserted),
        ("duplicates skipped", imp.duplicates),
        ("rows rejected", imp.rejected),
    ):
        table.add_row(label, str(value))
    console.print(table)
    if not imp.shown:
        return
    rejects = Table(title="Rejected rows")
    rejects.add_column("line", justify="right")
    rejects.add_column("reason", overflow="fold")
    for line, reason in imp.shown:
        rejects.add_row(str(line), reason)
    console.print(rejects)
    if imp.rejected > len(imp.shown):
        hint = "" if imp.rejects_out else " (--rejects FILE writes them all)"
        console.print(f"… and {imp.rejected - len(imp.shown)} more rejected rows{hint}")


def _stopped_note(imp: _Importer) -> str:
    note = f"import stopped at row {imp.rows}; the jobs counted as inserted above are written"
    if imp.unanswered is None:
        return note
    jobs, present = imp.unanswered
    if present is None:
        return f"{note}; the last write ({jobs} jobs) got no answer: its outcome is unknown"
    return (
        f"{note}; the last write ({jobs} jobs) got no answer: read back, the store holds "
        f"{present} of them (new, or there before)"
    )


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
        total = _count_lines(file)
    except (OSError, BadJobInput) as e:
        print_error(f"cannot read {given}: {e}")
        raise typer.Exit(2) from None
    rejects_out = rejects_path.open("w", encoding="utf-8") if rejects_path else None
    imp: _Importer | None = None
    try:
        with cli_runtime() as rt:
            imp = _Importer(rt, kind.value if kind else None, rejects_out, preserve)
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
            _import_report(imp)
            console.print(_stopped_note(imp))
        raise
    finally:
        if rejects_out is not None:
            rejects_out.close()
    _import_report(imp)
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
        ("recrawl", recrawl["mode"]),
        ("configured interval", _duration(recrawl["configured_interval_s"])),
        ("current interval", _duration(recrawl["current_interval_s"])),
        ("bounds", bounds),
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
