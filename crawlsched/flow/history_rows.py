"""A run's task history as its page shows it: each row with the page it crawled and why it
failed (the kind of error and the HTTP status)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from crawlsched.catalog import JOB_COLLECTIONS
from crawlsched.ids import decode_id
from crawlsched.planning.failures import failure_of, page_of
from crawlsched.runtime import Runtime


def shown_rows(rt: Runtime, rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`rows` with `url`, `error_kind` and `http_status`. A row written before rows kept
    their page takes it from its job, while the job is still in the store."""
    missing: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        if not row.get("url") and isinstance(row.get("collection"), str):
            try:
                missing[row["collection"]].append(decode_id(str(row.get("job_id"))))
            except ValueError:
                continue
    pages = {}
    for collection, ids in missing.items():
        if collection not in JOB_COLLECTIONS:
            continue
        for job in rt.jobs(collection).pages_of(ids):
            pages[(collection, job["_id"])] = page_of(job)
    shown = []
    for row in rows:
        kind, status = failure_of(row)
        url = row.get("url") or _page(pages, row)
        shown.append({**row, "url": url, "error_kind": kind, "http_status": status})
    return shown


def _page(pages: Mapping[tuple[str, Any], str | None], row: Mapping[str, Any]) -> str | None:
    try:
        return pages.get((str(row.get("collection")), decode_id(str(row.get("job_id")))))
    except ValueError:
        return None
