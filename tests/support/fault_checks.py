"""What must hold of a run over a served link graph after a fault, read from the site's own
access log and the store: the fault-injection benchmark and the suite's fault tests share it.

- every reachable page was fetched and stored in the run, or given up with a recorded reason
  (its job ended with an outcome and, unless it succeeded, a `last_error`); the others are
  `pages_lost`;
- nothing counted twice: the run's counts add up to its planned + discovered jobs exactly;
- the run ended exactly once (one end event in `activity`, one event id on the exchange and
  one idempotency key at the webhook), after the site's last fetch, with the result its pages
  call for: `incomplete` when any was given up (`expired`), else `succeeded`;
- its end was delivered: seen on the exchange (where there is one) and at the webhook;
- no lease held (no job under a dispatch, no batch waiting, no account or node leased)
  and nothing left running (no job in state 2).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.support.link_graph import LinkGraph

END_EVENTS = ("RunFinished", "RunFailed", "RunIncomplete", "RunStopped")
GIVEN_UP = ("failed", "exhausted", "expired")  # outcomes that end a page without its result
ROBOTS = "/robots.txt"
RUNNING = 2
PLANNED_MARKER = "planned"


@dataclass
class RunCheck:
    run_id: str
    state: str | None
    result: str | None
    expected_result: str
    pages_lost: list[str] = field(default_factory=list)
    counted: int = 0  # the run's counts, summed
    jobs: int = 0  # planned + discovered
    end_events: int = 0  # in the activity collection
    ended_after_last_fetch: bool = False
    fetches_after_end: int = 0
    exchange_end_ids: set[str] | None = None  # None: no exchange to watch (standalone)
    webhook_keys: set[str] = field(default_factory=set)  # idempotency keys answered 2xx
    leases_held: int = 0
    held_detail: str = ""  # what is still held, when something is
    running: int = 0
    fetched_twice: int = 0
    expired: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def counted_twice(self) -> int:
        return max(self.counted - self.jobs, 0)

    @property
    def ended(self) -> bool:
        return self.state in ("finished", "stopped")

    @property
    def ended_early(self) -> bool:
        """Ended before its last fetch, or with jobs not counted."""
        return self.ended and (not self.ended_after_last_fetch or self.counted < self.jobs)

    @property
    def ended_twice(self) -> bool:
        ids = self.exchange_end_ids or set()
        return self.end_events > 1 or len(ids) > 1 or len(self.webhook_keys) > 1

    @property
    def end_delivered(self) -> bool:
        on_exchange = self.exchange_end_ids is None or bool(self.exchange_end_ids)
        return self.end_events >= 1 and on_exchange and bool(self.webhook_keys)

    def problems(self) -> list[str]:
        """Every invariant that does not hold, in words (empty: the run is right)."""
        found = []
        if not self.ended:
            found.append(f"run not ended (state {self.state})")
        if self.pages_lost:
            found.append(f"{len(self.pages_lost)} pages lost: {sorted(self.pages_lost)[:10]}")
        if self.counted != self.jobs:
            found.append(f"counts add up to {self.counted}, planned + discovered {self.jobs}")
        if self.ended_early:
            found.append(f"ended before its last fetch ({self.fetches_after_end} fetches after)")
        if self.ended_twice:
            found.append(
                f"ended more than once: {self.end_events} end events, exchange ids "
                f"{sorted(self.exchange_end_ids or [])}, webhook keys {sorted(self.webhook_keys)}"
            )
        if self.ended and not self.end_delivered:
            found.append(
                f"end not delivered: {self.end_events} end events stored, exchange "
                f"{self.exchange_end_ids}, webhook keys {sorted(self.webhook_keys)}"
            )
        if self.ended and self.result != self.expected_result:
            found.append(f"result {self.result!r}, expected {self.expected_result!r}")
        if self.leases_held:
            found.append(f"{self.leases_held} leases still held: {self.held_detail}")
        if self.running:
            found.append(f"{self.running} jobs still running")
        return found


def unix_time(value: datetime | None) -> float | None:
    if value is None:
        return None
    if value.tzinfo is None:  # BSON datetimes come back naive, in UTC
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _path(target: str, base_url: str) -> str | None:
    return target.removeprefix(base_url) if target.startswith(base_url) else None


def jobs_by_path(collection: Any, base_url: str) -> dict[str, dict[str, Any]]:
    """Each URL's job: a planned job has a `target`, a discovered one a `url`. A planned
    page's marker among the run's children (outcome `planned`) is not a job."""
    jobs: dict[str, dict[str, Any]] = {}
    for doc in collection.find({"last_outcome": {"$ne": PLANNED_MARKER}}):
        path = _path(doc.get("target") or doc.get("url") or "", base_url)
        if path is not None:
            jobs[path] = doc
    return jobs


def check_run(
    db: Any,
    run_id: str,
    graph: LinkGraph,
    base_url: str,
    access_log: Sequence[tuple[float, str]],
    exchange_events: Iterable[Mapping[str, Any]] | None = None,
    webhook_posts: Iterable[Mapping[str, Any]] = (),
    collection: str = "websites",
) -> RunCheck:
    """Check one run in `db` (a pymongo-like database) whose site saw `access_log`.

    `exchange_events` are the bodies taken from a queue bound to `run.#` on the events
    exchange (None where there is no exchange); `webhook_posts` the receiver's posts.
    """
    run = db.runs.find_one({"_id": run_id}) or {}
    counts = {k: v for k, v in (run.get("counts") or {}).items() if v}
    jobs = jobs_by_path(db[collection], base_url)
    stored = {
        path
        for doc in db.articles.find({"run_id": run_id}, {"key": 1})
        if (path := _path(doc.get("key", ""), base_url)) is not None
    }
    fetched = Counter(path for _, path in access_log if path != ROBOTS)
    outcomes = Counter(doc.get("last_outcome") or "none" for doc in jobs.values())

    lost = []
    for path in graph.reachable():
        doc = jobs.get(path)
        if doc is None or doc.get("state") == RUNNING:
            lost.append(path)
            continue
        outcome = doc.get("last_outcome")
        if outcome == "succeeded":
            ok = fetched[path] > 0 and (path in stored or path not in graph.stored())
        else:
            ok = outcome in GIVEN_UP and bool(doc.get("last_error"))
        if not ok:
            lost.append(path)

    finished_at = unix_time(run.get("finished_at"))
    # BSON keeps milliseconds: allow the one the end time may have lost.
    after_end = [t for t, path in access_log if path != ROBOTS and finished_at is not None]
    after_end = [t for t in after_end if t > finished_at + 0.001]
    end_events = db.activity.count_documents({"run_id": run_id, "event": {"$in": END_EVENTS}})
    held_jobs = [
        (str(d["_id"]), d.get("state"), d.get("dispatch_id"), d.get("last_outcome"))
        for d in jobs.values()
        if d.get("dispatch_id") or d.get("lease_deadline")
    ]
    waiting = list(db.waiting_batches.find({"run_id": run_id}, {"needs": 1, "jobs": 1}))
    leased = 0
    for pool in ("accounts", "selenium_nodes"):  # resource leases, of any holder
        leased += sum(len(d["leases"]) for d in db[pool].find({"leases.0": {"$exists": True}}))
    held = len(held_jobs) + len(waiting) + leased
    held_detail = f"jobs {held_jobs[:5]}, waiting batches {waiting[:5]}, resource leases {leased}"

    exchange_ids = None
    if exchange_events is not None:
        exchange_ids = {
            str(e.get("event_id") or e.get("_id"))
            for e in exchange_events
            if e.get("run_id") == run_id and e.get("event") in END_EVENTS
        }
    keys = {
        str(p.get("key") or p["body"].get("event_id") or p["body"].get("event"))
        for p in webhook_posts
        if 200 <= p.get("status", 0) < 300 and p["body"].get("run_id") == run_id
    }
    expired = counts.get("expired", 0)
    return RunCheck(
        run_id=run_id,
        state=run.get("state"),
        result=run.get("result"),
        expected_result="incomplete" if outcomes.get("expired") else "succeeded",
        pages_lost=lost,
        counted=sum(counts.values()),
        jobs=run.get("planned", 0) + run.get("discovered", 0),
        end_events=end_events,
        ended_after_last_fetch=finished_at is not None and not after_end,
        fetches_after_end=len(after_end),
        exchange_end_ids=exchange_ids,
        webhook_keys=keys,
        leases_held=held,
        held_detail=held_detail,
        running=sum(1 for d in jobs.values() if d.get("state") == RUNNING),
        fetched_twice=sum(n - 1 for n in fetched.values() if n > 1),
        expired=expired,
        outcomes=dict(outcomes),
    )
