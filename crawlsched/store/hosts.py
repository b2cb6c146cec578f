"""MongoHostStore: one document per host in `hosts`, the cluster's one clock for it.

Who holds the host (a time-slice lease), when the next request may start, whether a 429/503
blocked it and until when, the pages sent today, an operator's own limits for it, and the
site's robots.txt as one process fetched it for everyone. Decisions are the pure rules of
`resources/host_rules.py`, written back by compare-and-set on `version` (as the account and
node leases are).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from pymongo.errors import DuplicateKeyError

from crawlsched.resources import host_rules
from crawlsched.resources.host_rules import Granted, HostPolicy, HostState, Refused, Renewed
from crawlsched.store.counting import CountingDatabase

CAS_ATTEMPTS = 16
STATE_FIELDS = (
    "holder",
    "lease_until",
    "lease_granted_at",
    "wanted_at",
    "next_start",
    "blocked_until",
    "blocked_reason",
    "backoff_tries",
    "day",
    "pages_today",
)


def state_of(doc: dict[str, Any] | None) -> HostState:
    if not doc:
        return HostState()
    return HostState(**{k: doc[k] for k in STATE_FIELDS if doc.get(k) is not None})


class MongoHostStore:
    def __init__(self, db: CountingDatabase) -> None:
        self._hosts = db.hosts
        # Each host's document as this process's last write left it. A change is first
        # decided on it and written by compare-and-set on its version: the holder's renewals
        # and releases then cost one command, not a read and a write. A lost compare-and-set
        # (someone else wrote) reads the document again; a decision to change nothing is
        # always confirmed on a fresh read.
        self._seen: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self._hosts.find_one({"_id": key})

    def held(self, key: str, now: datetime) -> bool:
        """Whether some process holds the host right now."""
        doc = self.get(key) or {}
        until = doc.get("lease_until")
        return bool(doc.get("holder")) and until is not None and until > now

    def list(self) -> list[dict[str, Any]]:
        return list(self._hosts.find({}).sort("_id", 1))

    def _doc(self, key: str, now: datetime) -> dict[str, Any]:
        doc = self.get(key)
        if doc is not None:
            return doc
        with contextlib.suppress(DuplicateKeyError):  # another process made it first
            self._hosts.insert_one({"_id": key, "version": 0, "created_at": now})
        return self.get(key) or {"_id": key, "version": 0}

    def _change(
        self, key: str, now: datetime, decide: Callable[[dict[str, Any]], dict | None]
    ) -> dict[str, Any] | None:
        """Apply `decide(doc)` (fields to set, or None for no change) by compare-and-set; the
        document as it was read when the change went in (or when nothing was to change)."""
        doc, fresh = self._seen.get(key), False
        for _ in range(CAS_ATTEMPTS):
            if doc is None:
                doc, fresh = self._doc(key, now), True
            fields = decide(doc)
            if fields is None:
                if not fresh:
                    doc = None  # decided on what we last wrote: confirm on the store's own
                    continue
                return doc
            done = self._hosts.update_one(
                {"_id": key, "version": doc.get("version")},
                {"$set": {**fields, "updated_at": now}, "$inc": {"version": 1}},
            )
            if done.modified_count == 1:
                self._remember(key, {**doc, **fields, "updated_at": now})
                return doc
            doc = None  # someone else changed it: read it again
        raise RuntimeError(f"host {key}: too many concurrent changes")

    def _remember(self, key: str, doc: dict[str, Any]) -> None:
        if len(self._seen) >= 10_000:
            self._seen.clear()
        self._seen[key] = {**doc, "version": int(doc.get("version") or 0) + 1}

    # -- the lease ------------------------------------------------------------------------------

    def acquire(
        self,
        key: str,
        holder: str,
        policy: HostPolicy,
        now: datetime,
        slice_s: float,
    ) -> tuple[Granted | Refused, HostPolicy]:
        """Take the host for one slice, or learn until when not (and why). Returns the
        decision and the policy in force (the host's own limits and its robots.txt
        `Crawl-delay` laid over `policy`)."""
        outcome: list[Any] = []

        def decide(doc: dict[str, Any]) -> dict | None:
            effective = effective_policy(doc, policy)
            state = state_of(doc)
            # A slice always fits a few requests, however long the host's delay.
            slice_for = max(slice_s, 3 * effective.delay_s)
            decision = host_rules.decide(state, effective, holder, now, slice_for)
            outcome[:] = [decision, effective]
            if isinstance(decision, Refused):
                if decision.held and state.wanted_at is None:
                    return {"wanted_at": now}
                return None
            return {
                "holder": holder,
                "lease_until": decision.lease_until,
                "lease_granted_at": now,
                "wanted_at": None,
                "in_flight": 0,
                "in_flight_at": now,
            }

        self._change(key, now, decide)
        return outcome[0], outcome[1]

    def renew(
        self,
        key: str,
        holder: str,
        now: datetime,
        slice_s: float,
        pages: int = 0,
        next_start: datetime | None = None,
        in_flight: int = 0,
        policy: HostPolicy | None = None,
    ) -> Renewed | None:
        """Another slice for the holder, unless someone asked for the host meanwhile (or the
        holder lost it): its end and the pages left today once the `pages` sent since the
        last count are counted (under `policy` with the host's own limits over it), or None.
        Notes the holder's `in_flight` requests (read by `crawlsched hosts`: a reading as of
        this renewal, written with it rather than by a command of its own)."""
        until = now + timedelta(seconds=slice_s)
        renewed: list[Renewed] = []

        def decide(doc: dict[str, Any]) -> dict | None:
            renewed.clear()  # (a decision whose write lost its compare-and-set is not one)
            state = state_of(doc)
            if not host_rules.may_renew(state, holder, now):
                return None
            counted = state.counted(pages, now)
            left = None
            if policy is not None:
                left = host_rules.pages_left(counted, effective_policy(doc, policy), now)
            renewed.append(Renewed(until, left))
            fields = {"lease_until": until, "day": counted.day, "pages_today": counted.pages_today}
            fields.update(in_flight=max(int(in_flight), 0), in_flight_at=now)
            if next_start is not None:
                fields["next_start"] = next_start
            return fields

        self._change(key, now, decide)
        return renewed[0] if renewed else None

    def release(
        self, key: str, holder: str, next_start: datetime | None, pages: int, now: datetime
    ) -> None:
        """Give the host back (the rest of the slice unused): the next holder starts no earlier
        than `next_start`; `pages` requests were sent in the slice."""

        def decide(doc: dict[str, Any]) -> dict | None:
            fields = _counted(doc, pages, now)
            if next_start is not None:
                known = doc.get("next_start")
                fields["next_start"] = max(next_start, known) if known else next_start
            if doc.get("holder") == holder:
                fields.update(holder=None, lease_until=now, in_flight=0, in_flight_at=now)
            return fields

        self._change(key, now, decide)

    # -- blocks -----------------------------------------------------------------------------

    def block(self, key: str, until: datetime, reason: str, now: datetime) -> tuple[datetime, bool]:
        """Block the host for everyone until `until` (a later block already there stands);
        returns the block's end, and whether this began it (the host was not blocked)."""
        ends: list[datetime] = []

        def decide(doc: dict[str, Any]) -> dict | None:
            ends.clear()
            current = doc.get("blocked_until")
            end = max(until, current) if current and current > now else until
            ends.append(end)
            return {
                "blocked_until": end,
                "blocked_reason": reason[:200],
                "blocked_at": now,
                "backoff_tries": int(doc.get("backoff_tries") or 0) + 1,
            }

        before = self._change(key, now, decide) or {}
        current = before.get("blocked_until")
        return ends[-1], not (current and current > now)

    def backoff_tries(self, key: str) -> int:
        doc = self.get(key)
        return int(doc.get("backoff_tries") or 0) if doc else 0

    def clear_backoff(self, key: str, now: datetime) -> None:
        """A good answer after a block: the next block starts its backoff from the beginning."""
        self._hosts.update_one(
            {"_id": key, "backoff_tries": {"$gt": 0}},
            {"$set": {"backoff_tries": 0, "updated_at": now}, "$inc": {"version": 1}},
        )

    def unblock(self, key: str, now: datetime) -> bool:
        done = self._hosts.update_one(
            {"_id": key},
            {
                "$set": {"blocked_until": None, "blocked_reason": "", "backoff_tries": 0},
                "$inc": {"version": 1},
            },
        )
        return done.matched_count == 1

    # -- an operator's limits ----------------------------------------------------------------

    def set_policy(self, key: str, policy: dict[str, Any], now: datetime) -> dict[str, Any]:
        """The host's own limits (None for a key: the media's or the global default again)."""

        def decide(doc: dict[str, Any]) -> dict | None:
            merged = {**(doc.get("policy") or {}), **policy}
            return {"policy": {k: v for k, v in merged.items() if v is not None}}

        self._change(key, now, decide)
        return self.get(key) or {}

    # -- robots.txt, once per site for the cluster -------------------------------------------

    def robots(self, key: str) -> dict[str, Any] | None:
        doc = self.get(key)
        return (doc or {}).get("robots")

    def claim_robots(self, key: str, holder: str, now: datetime, for_s: float) -> bool:
        """The right to fetch the site's robots.txt for everyone (for `for_s` seconds)."""
        claimed: list[bool] = []

        def decide(doc: dict[str, Any]) -> dict | None:
            claimed.clear()  # (a decision whose write lost its compare-and-set is not one)
            until = doc.get("robots_claim_until")
            if until is not None and until > now and doc.get("robots_claimed_by") != holder:
                return None
            claimed.append(True)
            return {
                "robots_claimed_by": holder,
                "robots_claim_until": now + timedelta(seconds=for_s),
            }

        self._change(key, now, decide)
        return bool(claimed)

    def unclaim_robots(self, key: str, holder: str) -> None:
        self._hosts.update_one(
            {"_id": key, "robots_claimed_by": holder},
            {
                "$set": {"robots_claim_until": None, "robots_claimed_by": None},
                "$inc": {"version": 1},
            },
        )

    def store_robots(
        self, key: str, status: int, text: str, crawl_delay_s: float | None, now: datetime
    ) -> None:
        self._change(
            key,
            now,
            lambda doc: {
                "robots": {"status": status, "text": text, "fetched_at": now},
                "crawl_delay_s": crawl_delay_s,
                "robots_claim_until": None,
                "robots_claimed_by": None,
            },
        )

    def raise_crawl_delay(self, key: str, crawl_delay_s: float, now: datetime) -> None:
        """A group's delay raised by one of its origins' `Crawl-delay` (pacing by domain or
        address): the largest any of them asked for stands."""

        def decide(doc: dict[str, Any]) -> dict | None:
            known = doc.get("crawl_delay_s")
            if isinstance(known, int | float) and known >= crawl_delay_s:
                return None
            return {"crawl_delay_s": crawl_delay_s}

        self._change(key, now, decide)


def effective_policy(doc: dict[str, Any] | None, policy: HostPolicy) -> HostPolicy:
    """The caller's policy with the host's own limits over it, raised by its Crawl-delay."""
    doc = doc or {}
    merged = host_rules.merge_policy(policy, doc.get("policy"))
    return merged.with_crawl_delay(doc.get("crawl_delay_s"))


def _counted(doc: dict[str, Any], pages: int, now: datetime) -> dict[str, Any]:
    counted = state_of(doc).counted(pages, now)
    return {"day": counted.day, "pages_today": counted.pages_today}
