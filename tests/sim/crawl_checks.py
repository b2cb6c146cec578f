"""What must hold after a simulated crawl, checked against the store and the web's log. Each
check returns readable violations (an empty list: it holds)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from crawlsched.planning.outcomes import Outcome
from crawlsched.planning.run_control import end_event_id
from crawlsched.planning.run_end import run_end
from crawlsched.planning.run_names import ENDED
from crawlsched.store.embedded.ttl import expired_ids
from tests.sim import invariants
from tests.sim.web import SimWeb

# How the store records each end the web expects.
ENDS = {
    "succeeded": {Outcome.SUCCEEDED},
    "failed": {Outcome.FAILED, Outcome.EXHAUSTED},
    "given_up": {Outcome.GIVEN_UP, Outcome.EXPIRED},
}
FINAL = set().union(*ENDS.values())


def pages_ended_once(
    db: Any, run: dict[str, Any], web: SimWeb, refusals: int, strict: bool
) -> list[str]:
    """Every reachable page ended once, as the web says it must (succeeded, failed on its own
    merits, or given up with a reason); nothing else ended; the run counts each page once.

    Reachable is walked over the pages' actual ends (a page's links count once it succeeded):
    a page its host throttled a few times may end either way when a crash or a duplicate
    delivery lost a refusal the crawl had counted (`strict`: none could, so exactly as the
    web says), but one given up must have been throttled `refusals` times, and one throttled
    for ever must be given up."""
    run_id = run["_id"]
    docs = list(db.websites.find({"$or": [{"run_id": run_id}, {"scope_run": run_id}]}))
    by_url: dict[str, list[dict]] = {}
    for doc in docs:
        if doc.get("last_outcome") != "planned":  # (a seed marker, not a page)
            by_url.setdefault(doc.get("url") or doc.get("target"), []).append(doc)
    ends = {url: ds[0].get("last_outcome") for url, ds in by_url.items() if len(ds) == 1}
    throttled = Counter(r.url for r in web.log if r.status in (429, 503))
    found = []
    for url, allowed in sorted(_reachable(web, ends, refusals, strict).items()):
        got = [d.get("last_outcome") for d in by_url.get(url, [])]
        if len(got) != 1:
            found.append(f"{url}: {len(got)} job documents ({got}), expected one")
            continue
        doc = by_url[url][0]
        if not any(got[0] in ENDS[end] for end in allowed):
            why = (doc.get("last_error") or "")[:120]
            found.append(f"{url}: ended {got[0]} ({why}), expected {' or '.join(allowed)}")
        elif got[0] in ENDS["given_up"] and not doc.get("last_error"):
            found.append(f"{url}: given up with no reason")
        elif got[0] == Outcome.GIVEN_UP and throttled[url] < refusals:
            found.append(f"{url}: given up after {throttled[url]} refusals ({refusals} allowed)")
    reachable = _reachable(web, ends, refusals, strict)
    found += [f"{url}: a page of the run no crawl should reach" for url in by_url
              if url not in reachable]  # fmt: skip
    return found + _counted_once(run, by_url)


def _reachable(
    web: SimWeb, ends: dict[str, str | None], refusals: int, strict: bool
) -> dict[str, tuple[str, ...]]:
    """The pages a crawl must end, each with the ends it may have: breadth first from the
    seeds, each on its seed's host, following a page's links (a redirect's target) once the
    page succeeded."""
    site = web.site
    allowed: dict[str, tuple[str, ...]] = {}
    todo = [(seed, urlsplit(seed).hostname) for seed in web.seeds()]
    while todo:
        url, host = todo.pop()
        if url in allowed:
            continue
        allowed[url] = _may_end(site, url, refusals, strict)
        page = site.page(url)
        if page is None or ends.get(url) != Outcome.SUCCEEDED or site.disallowed(url):
            continue
        links = [page.location] if page.kind == "redirect" else list(page.links)
        for link in filter(None, links):
            target = link if link.startswith("http") else f"http://{host}{link}"
            if urlsplit(target).hostname == host:
                todo.append((target, host))
    return allowed


def _may_end(site: Any, url: str, refusals: int, strict: bool) -> tuple[str, ...]:
    page = site.page(url)
    if site.disallowed(url) or page is None or page.kind == "not_found":
        return ("failed",)
    if page.kind != "throttle":
        return ("succeeded",)
    if page.times is None:
        return ("given_up",)
    if strict:
        return ("given_up",) if page.times >= refusals else ("succeeded",)
    return ("succeeded", "given_up")


def _counted_once(run: dict[str, Any], by_url: dict[str, list[dict]]) -> list[str]:
    found = []
    counts = run.get("counts") or {}
    ended = sum(1 for ds in by_url.values() for d in ds if d.get("last_outcome") in FINAL)
    counted = sum(n for outcome, n in counts.items() if outcome in FINAL)
    if counted != ended:
        found.append(f"the run counts {counted} page ends ({dict(counts)}), the store has {ended}")
    planned, discovered = run.get("planned", 0), run.get("discovered", 0)
    if counted != planned + discovered:
        found.append(f"{counted} ends counted for {planned} planned + {discovered} discovered")
    return found


def fetched_once(web: SimWeb) -> list[str]:
    """With no crash and no message delivered twice, each page is fetched to an answer once:
    a page is crawled by exactly one batch (its own, or the one that took it over). Answers a
    host gave as refusals (429/503) are asked again by design, and robots.txt is the host's."""
    answered = Counter(
        r.url for r in web.log
        if not r.aborted and r.status not in (None, 429, 503) and r.path != "/robots.txt"
    )  # fmt: skip
    return [f"{url}: fetched {n} times, no crash or duplicate to explain it"
            for url, n in sorted(answered.items()) if n > 1]  # fmt: skip


def run_ended_once(db: Any, run: dict[str, Any] | None, web: SimWeb, start: datetime) -> list[str]:
    """The run ended exactly once, after the last fetch of every page it counted: a page may
    be fetched after the end only by a copy of a batch whose other copy ended the page before
    (a message delivered twice): wasted, but not an early end."""
    if run is None:
        return ["no run was opened"]
    if run.get("state") not in ENDED:
        return [f"the run never ended: {run.get('state')}, outstanding {run.get('outstanding')}"]
    found = [] if run.get("ends") == 1 else [f"the run ended {run.get('ends')} times"]
    ended_at = run["finished_at"]
    ended_s = (ended_at - start).total_seconds()
    for r in web.log:
        if r.start_s <= ended_s + 1e-6 or r.path == "/robots.txt":
            continue
        doc = db.websites.find_one({"$or": [{"url": r.url}, {"target": r.url}]}) or {}
        if doc.get("last_outcome") in FINAL and doc.get("modified_at", ended_at) <= ended_at:
            continue
        found.append(f"{r.url} fetched {r.start_s - ended_s:.3f} s after the run ended")
    return found


def politeness(web: SimWeb, delay_s: float, grace_s: float, crashes: list) -> list[str]:
    """No two starts to a host closer than its delay (its Crawl-delay raises it) across all
    processes, less a late wake-up's grace; no request while a block it answered is in force
    (a block whose answer died with its process aside)."""
    delays = {h: max(delay_s, float(web.crawl_delay(h) or 0)) for h in web.site.hosts}
    found = invariants.starts_too_close(web.log, delays, tolerance_s=grace_s)
    lost = invariants.lost_in_crash(crashes)
    return found + invariants.blocks_shortened(web.log, 1.0, lost=lost, tolerance_s=grace_s)


def nothing_left_held(db: Any, now: datetime) -> list[str]:
    """No job left running, no batch left waiting, no host slice or resource lease alive."""
    found = [f"job {d['_id']} left running under {d.get('dispatch_id')}"
             for d in db.websites.find({"state": 2})]  # fmt: skip
    found += [f"batch {d['_id']} left waiting for {d.get('needs')}" for d in db.waiting.find({})]
    found += [
        f"host {d['_id']} held by {d['holder']} until {d['lease_until']}"
        for d in db.hosts.find({"holder": {"$nin": [None, ""]}})
        if d.get("lease_until") and d["lease_until"] > now
    ]
    return found


def end_event_stored(db: Any, run: dict[str, Any]) -> list[str]:
    """The run's end stored once, by its id, as an event."""
    ends = {"$in": ["RunFinished", "RunIncomplete", "RunFailed", "RunStopped"]}
    events = list(db.activity.find({"run_id": run["_id"], "event": ends}))
    return [] if len(events) == 1 else [f"{len(events)} end events stored for the run"]


def announced(
    db: Any,
    run: dict[str, Any],
    published: list[tuple[str, str, float]],
    posts: list[tuple[str, bool]],
    owed: list[str],
) -> list[str]:
    """The run's end event published (at least once: consumers drop duplicates by id) and no
    event left owed to the exchange; every webhook delivery the end owed posted, none left
    undelivered, and none posted again once it was recorded delivered."""
    found = []
    end = run_end(run.get("counts") or {}, bool(run.get("stop_requested")))
    event_id = end_event_id(run["_id"], end.event, run.get("ends", 1))
    if event_id not in {eid for eid, _, _ in published}:
        found.append(f"the end event {event_id} was never published")
    found += [f"event {d['event_id']} still owed to the exchange"
              for d in db.activity.find({"outbox": "pending"})]  # fmt: skip
    found += [f"webhook delivery {d['_id']} still {d.get('state')}"
              for d in db.webhook_deliveries.find({"state": {"$ne": "delivered"}})]  # fmt: skip
    posted = Counter(delivery for delivery, _ in posts)
    found += [f"webhook delivery {delivery} never posted" for delivery in owed
              if delivery not in posted]  # fmt: skip
    found += [f"webhook delivery {delivery} posted after it was recorded delivered"
              for delivery, after in posts if after]  # fmt: skip
    return found


def owed_swept(db: Any, now: datetime) -> list[str]:
    """What a TTL sweep at `now` would delete that is still owed: an event not yet published,
    a webhook delivery not yet delivered, a page of a run that has not ended."""
    found = []
    for doc_id in expired_ids(db.activity, now):
        doc = db.activity.find_one({"_id": doc_id}) or {}
        if doc.get("outbox") == "pending":
            found.append(f"event {doc.get('event_id')} would be swept while owed")
    for doc_id in expired_ids(db.webhook_deliveries, now):
        doc = db.webhook_deliveries.find_one({"_id": doc_id}) or {}
        if doc.get("state") != "delivered":
            found.append(f"webhook delivery {doc_id} would be swept while {doc.get('state')}")
    for doc_id in expired_ids(db.websites, now):
        doc = db.websites.find_one({"_id": doc_id}) or {}
        run = db.runs.find_one({"_id": doc.get("scope_run")}) or {}
        if run and run.get("state") not in ENDED:
            found.append(f"page {doc_id} of the running run {run['_id']} would be swept")
    return found


def drains_bounded(drained: list[tuple[str, float]], bound_s: float) -> list[str]:
    """A process told to stop finishes its pages in flight and gives the rest back: it is done
    within about a page's time (its host's delay, a robots.txt, the page itself), not after
    its batches' whole crawl."""
    return [
        f"{process} took {took:.1f} s to drain (bound {bound_s:.1f} s)"
        for process, took in drained
        if took > bound_s
    ]
