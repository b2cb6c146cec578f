"""A crawl of one site (or several start URLs) in one call: a one-off website job per start
URL with the crawl's bounds, made due now (a job the URL already had is made due again), a
schedule of exactly those targets, and a run of it started now.

The schedule is kept stopped: it never fires by itself, and a crawl of the same start URLs
again reuses it (`crawl-` and a digest of the URLs), so its runs list together. Its run is
the crawl: `GET /v1/runs/{run}/timeline` follows it, `GET /v1/runs/{run}/items` gives what it
stored.
"""

from __future__ import annotations

import hashlib
from typing import Any

from crawlsched.catalog import JobState
from crawlsched.control import Senders
from crawlsched.errors import BadJobInput, Conflict
from crawlsched.flow import job_ops, schedule_ops
from crawlsched.jobs_input import DEFAULT_WEBSITE_MEDIA, MAX_DEPTH, MAX_PAGES
from crawlsched.runtime import Runtime

MAX_START_URLS = 100
OWNER = "crawl"
# Its schedule's trigger, never reached: the schedule is stopped as soon as it is made.
NEVER_S = 10 * 365 * 86400


def schedule_id_for(urls: list[str]) -> str:
    digest = hashlib.sha256("\n".join(sorted(set(urls))).encode()).hexdigest()[:12]
    return f"crawl-{digest}"


def start(
    rt: Runtime,
    senders: Senders,
    urls: list[str],
    depth: int = 2,
    max_pages: int = 100,
    media: str = DEFAULT_WEBSITE_MEDIA,
) -> dict[str, Any]:
    """Crawl `urls` now, `depth` links deep and at most `max_pages` pages found from each."""
    if not 1 <= len(urls) <= MAX_START_URLS:
        raise BadJobInput(f"urls: 1 to {MAX_START_URLS} start URLs, got {len(urls)}")
    if not 0 <= depth <= MAX_DEPTH or not 0 <= max_pages <= MAX_PAGES:
        raise BadJobInput(f"depth: 0 to {MAX_DEPTH}; max_pages: 0 to {MAX_PAGES}")
    planner = senders.planner()  # before anything is written: nothing would crawl it
    jobs = [_job_due_now(rt, url, depth, max_pages, media) for url in urls]
    targets = sorted({job["target"] for job in jobs})
    schedule_id = schedule_id_for(targets)
    if rt.schedules.get(schedule_id) is None:
        schedule_ops.create(
            rt,
            schedule_id,
            {
                "interval_s": NEVER_S,
                "target_collection": "websites",
                "targets": targets,
                "owner": OWNER,
            },
        )
        schedule_ops.stop(rt, schedule_id)
    run_id = schedule_ops.run_now(rt, schedule_id, planner)
    return {"run_id": run_id, "schedule_id": schedule_id, "jobs": jobs}


def _job_due_now(rt: Runtime, url: str, depth: int, max_pages: int, media: str) -> dict[str, Any]:
    fields = {
        "kind": "website",
        "media": media,
        "target": url,
        "one_off": True,
        "max_depth": depth,
        "max_pages": max_pages,
    }
    added = job_ops.add_target(rt, fields)
    jobs = rt.jobs(added.collection)
    for doc in added.stored:
        if doc.get("state") == int(JobState.RUNNING) or doc.get("dispatch_id"):
            raise Conflict(
                f"{doc['target']} is being crawled (run {doc.get('run_id') or '?'}): wait for "
                "that run, or stop it"
            )
        jobs.crawl_again_once(doc["_id"], rt.now(), {"max_depth": depth, "max_pages": max_pages})
    first = added.stored[0]
    shown = job_ops.public_job(added.collection, first)
    return {"job_id": shown["job_id"], "target": first["target"]}
