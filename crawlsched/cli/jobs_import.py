"""What `crawlsched jobs import` does with a file's rows: validate each one, write the valid
ones in bulks, keep the rejected ones with their reason, and report what was written (also when
the import stops halfway, so that a re-run is safe to plan)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, TextIO

import pymongo.errors
from rich.table import Table

from crawlsched.catalog import TARGET_KINDS
from crawlsched.cli.common import UNANSWERED_WRITE_ERRORS, console
from crawlsched.errors import BadJobInput, WriteOutcomeUnknown
from crawlsched.flow import job_ops
from crawlsched.jobs_input import (
    DEFAULT_WEBSITE_MEDIA,
    JobInput,
    build_job_docs,
    from_extended_json,
    job_input_from_row,
    preserved_job_doc,
)
from crawlsched.runtime import Runtime

IMPORT_CHUNK = 1000  # job documents per bulk write
SHOWN_REJECTS = 50
RERUN_IS_SAFE = (
    "Running the same import again is safe: jobs already in the store are skipped as duplicates."
)


class JobImporter:
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


def count_lines(path: Path) -> int:
    lines, last = 0, b"\n"
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


def import_report(imp: JobImporter) -> None:
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


def stopped_note(imp: JobImporter) -> str:
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
