"""Read-side views shared by the command line, the HTTP API and the status page: accounts and
nodes with their state, waiting batches, system counts and the activity feed.

Each returns plain documents (dates as datetimes); callers only format them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from crawlsched.catalog import JOB_COLLECTIONS, STATE_NAMES, by_state_name
from crawlsched.ids import encode_id
from crawlsched.planning.outcomes import Outcome
from crawlsched.resources import host_rules, rules
from crawlsched.resources.queueing import describe_keys
from crawlsched.runtime import Runtime
from crawlsched.store.host_docs import effective_policy


def account_rows(rt: Runtime, media: str | None = None) -> list[dict[str, Any]]:
    """Accounts with their state and load, never their secrets."""
    now = rt.now()
    return [
        {
            "media": a["media_name"],
            "username": a["username"],
            "state": rules.account_state(a, now),
            "held": len(rules.live_leases(a, now)),
            "max_concurrent": rules.capacity_of(rules.ACCOUNT_POOL, a),
            "cooling_until": rules.cooling_until(a),
            "reason": a.get("status_reason"),
            "last_leased_at": a.get("last_leased_at"),
        }
        for a in rt.inventory.accounts(media)
    ]


def node_rows(rt: Runtime) -> list[dict[str, Any]]:
    now = rt.now()
    return [
        {
            "url": n["url"],
            "kind": n.get("kind"),
            "state": rules.node_state(n),
            "held": len(rules.live_leases(n, now)),
            "capacity": rules.capacity_of(rules.SELENIUM_POOL, n),
            "checked_at": n.get("checked_at"),
            "reason": n.get("health_reason"),
        }
        for n in rt.inventory.nodes()
    ]


def waiting_groups(rt: Runtime, waiting: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Waiting batches grouped by what they wait for: batches, jobs, the oldest wait. `needs`
    are the resource keys themselves (`account:twitter`, `host:https://example.com`)."""
    now = rt.now()
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for doc in waiting:
        key = (describe_keys(doc["needs"]), doc["media_name"])
        group = groups.setdefault(
            key, {"batches": 0, "jobs": 0, "oldest": now, "needs": sorted(doc["needs"])}
        )
        group["batches"] += 1
        group["jobs"] += doc.get("jobs", 0)
        group["oldest"] = min(group["oldest"], doc["enqueued_at"])
    return [
        {
            "waits_for": needs,
            "needs": g["needs"],
            "media": media,
            "batches": g["batches"],
            "jobs": g["jobs"],
            "oldest_wait_s": round((now - g["oldest"]).total_seconds(), 1),
        }
        for (needs, media), g in sorted(groups.items())
    ]


def pools_overview(rt: Runtime) -> dict[str, Any]:
    waiting = rt.waiting.all()
    return {
        "pools": rt.inventory.overview(rt.now()),
        "waiting": waiting_groups(rt, waiting),
        "waiting_batches": len(waiting),
    }


def gather_stats(rt: Runtime) -> dict[str, Any]:
    """Counts across the system, as `crawlsched store stats --json` and `GET /v1/stats` give them
    (`api.models.StatsView`): jobs by state name, seed markers apart as pages seen."""
    return {
        "runs_by_state": rt.runs.counts_by("state"),
        "runs_by_result": rt.runs.counts_by("result"),
        "jobs_by_state": {c: by_state_name(rt.jobs(c).summary()) for c in JOB_COLLECTIONS},
        "pages_seen": {c: rt.jobs(c).pages_seen() for c in JOB_COLLECTIONS},
        "executions_by_outcome": rt.history.outcome_totals(),
        "waiting_batches": len(rt.waiting.all()),
        "webhooks_by_state": rt.deliveries.counts_by_state(),
        "events_by_name": rt.activity.counts_by_event(),
    }


def activity(
    rt: Runtime, run_id: str | None = None, limit: int = 50, skip: int = 0
) -> list[dict[str, Any]]:
    """Run, schedule, account, node and host events, newest first."""
    return rt.activity.recent(run_id, limit, skip)


# A running run's pages per depth are a count over every page it discovered: a page refreshed
# by several viewers, or a script polling the run's state ten times a second, would pay that
# count on every read (a third of a 16-thread standalone's time on a 3,000-page crawl). The
# count is reused for this long (its reports change the run's document many times a second,
# so that cannot be the key), and read again at once when the run's state changes: an ended
# run's table is exact.
DEPTH_REUSE_S = 1.0
DEPTH_CACHE_RUNS = 64


def by_depth(rt: Runtime, run: dict[str, Any], fresh: bool = False) -> list[dict[str, Any]]:
    """Depth 0 is what was planned; deeper rows are the children, summed over collections
    (`fresh`: counted now, never reused; what is kept for good, like a frozen timeline)."""
    rows = _children_by_depth(rt, run, fresh)
    children_left = sum(r["outstanding"] for r in rows.values())
    planned = run.get("planned", 0)
    left = 0 if run.get("planning") else max(run.get("outstanding", 0) - children_left, 0)
    table = [{"depth": 0, "discovered": planned, "outstanding": left, "done": planned - left}]
    for depth, row in sorted(rows.items()):
        table.append({"depth": depth, **row, "done": row["discovered"] - row["outstanding"]})
    return table


def _children_by_depth(rt: Runtime, run: dict[str, Any], fresh: bool) -> dict[int, dict[str, int]]:
    version = (run["_id"], run.get("state"), run.get("planning"))
    now = rt.env.monotonic()
    kept = rt.view_cache.get(("by_depth", run["_id"]))
    if not fresh and kept is not None and kept[1][0] == version and now - kept[0] < DEPTH_REUSE_S:
        return {depth: dict(row) for depth, row in kept[1][1].items()}
    rows: dict[int, dict[str, int]] = {}
    for collection in JOB_COLLECTIONS:
        for row in rt.children(collection).by_depth(run["_id"]):
            into = rows.setdefault(row["depth"], dict.fromkeys(("discovered", "outstanding"), 0))
            into["discovered"] += row["discovered"]
            into["outstanding"] += row["outstanding"]
    if len(rt.view_cache) >= DEPTH_CACHE_RUNS:
        rt.view_cache.drop_older_than(now - DEPTH_REUSE_S)
    rt.view_cache.put(("by_depth", run["_id"]), now, (version, rows))
    return {depth: dict(row) for depth, row in rows.items()}


def children_rows(
    rt: Runtime,
    run_id: str,
    limit: int,
    skip: int,
    outcome: str | None = None,
    errors: bool = False,
) -> list[dict[str, Any]]:
    """The pages a run discovered, by depth (`outcome`: only those whose last try ended so;
    `errors`: only those with an error)."""
    rows = []
    for collection in JOB_COLLECTIONS:
        for doc in rt.children(collection).of_run(
            run_id, limit + skip, outcome=outcome, errors=errors
        ):
            rows.append(
                {
                    "job_id": encode_id(doc["_id"]),
                    "collection": collection,
                    "task": doc.get("task"),
                    "depth": doc.get("depth"),
                    "state": STATE_NAMES.get(doc.get("state"), str(doc.get("state"))),
                    "outcome": doc.get("last_outcome"),
                    "url": doc.get("url"),
                    "error": doc.get("last_error"),
                }
            )
    rows.sort(key=lambda r: (r["depth"] or 0, r["job_id"]))
    return rows[skip : skip + limit]


def run_details(rt: Runtime, run: dict[str, Any]) -> dict[str, Any]:
    """A run with what waits for it, its child runs and its pages per depth."""
    waiting = rt.waiting.for_run(run["_id"])
    children = rt.runs.children_of(run["_id"]) if run.get("children") else []
    return {
        **run,
        "waiting": {"batches": len(waiting), "jobs": sum(d.get("jobs", 0) for d in waiting)},
        "waits_for": waiting_groups(rt, waiting),
        "child_runs": [{"_id": c["_id"], "state": c["state"]} for c in children],
        "by_depth": by_depth(rt, run),
        "given_up": given_up_named(rt, run),
    }


def given_up_named(rt: Runtime, run: dict[str, Any]) -> list[dict[str, Any]]:
    """As named on the run when its end was announced (its pages may have expired since),
    or read from its jobs while it is running."""
    if "given_up" in run:
        return run["given_up"]
    return given_up_of(rt, run) if gave_up(run.get("counts", {})) else []


# How many given-up pages a run's end names (the rest are counted, and listed by the run).
GIVEN_UP_NAMED = 20


def gave_up(counts: dict[str, int]) -> bool:
    """Whether a run's counts show pages it gave up (the machinery's, or their hosts')."""
    return bool(counts.get(Outcome.EXPIRED) or counts.get(Outcome.GIVEN_UP))


def given_up_of(rt: Runtime, run: dict[str, Any]) -> list[dict[str, Any]]:
    """The pages this run gave up, with why (the first few)."""
    rows: list[dict[str, Any]] = []
    for collection in JOB_COLLECTIONS:
        for doc in rt.jobs(collection).given_up(run["_id"], GIVEN_UP_NAMED - len(rows)):
            rows.append(
                {
                    "job_id": encode_id(doc["_id"]),
                    "url": doc.get("url") or doc.get("target"),
                    "task": doc.get("task"),
                    "reason": doc.get("last_error"),
                }
            )
        if len(rows) >= GIVEN_UP_NAMED:
            break
    return rows


def when(value: datetime | None) -> str:
    """A date for a table: UTC to the second, `-` when there is none."""
    from datetime import UTC

    return "-" if value is None else f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z"


def host_row(rt: Runtime, doc: dict[str, Any]) -> dict[str, Any]:
    """One host as `crawlsched hosts` shows it: the limits in force, who holds it and its
    requests in flight, when the next request may start, whether it is blocked and why, and
    its pages today."""
    now = rt.now()
    policy = effective_policy(doc, rt.host_policy)
    held = rt.hosts.held(doc["_id"], now)
    blocked = doc.get("blocked_until")
    if blocked is not None and blocked <= now:
        blocked = None  # a block that has run out
    robots = doc.get("robots") or {}
    return {
        "host": doc["_id"],
        "delay_s": policy.delay_s,
        "concurrency": policy.concurrency,
        "daily_pages": policy.daily_pages,
        "own_limits": doc.get("policy") or {},
        "crawl_delay_s": doc.get("crawl_delay_s"),
        "held_by": doc.get("holder") if held else None,
        "held_until": doc.get("lease_until") if held else None,
        # The holder's requests under way when it last renewed (nobody else may send).
        "in_flight": int(doc.get("in_flight") or 0) if held else 0,
        "in_flight_at": doc.get("in_flight_at") if held else None,
        "next_start": doc.get("next_start") if (doc.get("next_start") or now) > now else None,
        "blocked_until": blocked if blocked and blocked > now else None,
        "blocked_reason": (doc.get("blocked_reason") or None)
        if blocked and blocked > now
        else None,
        "pages_today": host_rules.HostState(
            day=doc.get("day") or "", pages_today=int(doc.get("pages_today") or 0)
        ).pages_on(now),
        "robots_fetched_at": robots.get("fetched_at"),
        "robots_status": robots.get("status"),
    }


def host_rows(rt: Runtime) -> list[dict[str, Any]]:
    return [host_row(rt, doc) for doc in rt.hosts.list()]
