"""`jobs import`: the rows of a file, read as they arrive, checked one by one and written in
bulks; every rejected row is given back with its reason, then a report of what was written
(also when the import stops halfway, so that a re-run is safe to plan)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

import pymongo.errors

from crawlsched.catalog import TARGET_KINDS
from crawlsched.control.writes import UNANSWERED_WRITE_ERRORS
from crawlsched.errors import BadJobInput, CrawlschedError, WriteOutcomeUnknown
from crawlsched.flow import job_ops
from crawlsched.import_files import lines_of, parse_import_lines
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
RERUN_IS_SAFE = (
    "Running the same import again is safe: jobs already in the store are skipped as duplicates."
)


def import_jobs(
    rt: Runtime,
    chunks: Iterable[bytes],
    format: str,
    kind: str | None = None,
    preserve: bool = False,
) -> Iterator[dict[str, Any]]:
    """Answer lines: `{"rejected": {line, reason, row}}` for each rejected row, then
    `{"report": {...}}`, with `error` when the import stopped before the end."""
    if kind is not None and kind not in TARGET_KINDS:
        raise BadJobInput(f"kind: one of {', '.join(TARGET_KINDS)}, got {kind!r}")
    rows = parse_import_lines(lines_of(chunks), format)
    if preserve and format != "jsonl":  # job documents are JSON: every row says so
        rows = ((n, BadJobInput("preserve reads JSON lines only")) for n, _ in rows)
    importer = JobImporter(rt, kind, preserve)
    error = None
    try:
        for line, raw in rows:
            yield from importer.add(line, raw)
        importer.finish()
    except (CrawlschedError, pymongo.errors.PyMongoError) as e:
        error = str(e) if isinstance(e, CrawlschedError) else f"MongoDB: {type(e).__name__}: {e}"
    yield {"report": importer.report(error)}


class JobImporter:
    """Validates rows one by one and writes their jobs in bulks of IMPORT_CHUNK per collection."""

    def __init__(self, rt: Runtime, kind: str | None, preserve: bool = False) -> None:
        self.rt, self.kind, self.preserve = rt, kind, preserve
        self.now = rt.now()
        self.rows = self.valid = self.inserted = self.duplicates = self.rejected = 0
        self.pending: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.media: dict[str, tuple[dict[str, Any], set[str]] | BadJobInput] = {}
        # (jobs in the write MongoDB never answered, how many of them it holds: None unknown)
        self.unanswered: tuple[int, int | None] | None = None

    def report(self, error: str | None) -> dict[str, Any]:
        done = {
            "rows": self.rows,
            "valid": self.valid,
            "inserted": self.inserted,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
        }
        if error is not None:
            jobs, present = self.unanswered or (None, None)
            done["error"] = {"message": error, "unanswered": jobs, "present": present}
        return done

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

    def _media_of(self, job: JobInput) -> tuple[dict[str, Any], set[str]]:
        return self._media_named(job.media_name)

    def add(self, line: int, raw: dict[str, Any] | Exception) -> Iterator[dict[str, Any]]:
        """Take one row; the rejection it earned, if any."""
        self.rows += 1
        if isinstance(raw, Exception):
            yield self._reject(line, str(raw), None)
            return
        try:
            if self.preserve:
                collection, docs = self._preserved(raw)
            else:
                job = job_input_from_row(raw, self.kind)
                docs = build_job_docs(job, *self._media_of(job), self.now, self.rt.allowed_networks)
                collection = TARGET_KINDS[job.kind].collection
        except BadJobInput as e:
            yield self._reject(line, str(e), raw)
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
    def _read_back(store: Any, chunk: list[dict[str, Any]]) -> int | None:
        try:
            return store.count_present(chunk)
        except pymongo.errors.PyMongoError:
            return None

    def _reject(self, line: int, reason: str, raw: dict[str, Any] | None) -> dict[str, Any]:
        self.rejected += 1
        return {"rejected": {"line": line, "reason": reason, "row": raw}}
