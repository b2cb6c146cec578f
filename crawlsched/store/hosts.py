"""MongoHostStore: one document per host in `hosts`, the cluster's one clock for it.

Who holds the host (a time-slice lease), when the next request may start, whether a 429/503
blocked it and until when, the pages sent today, an operator's own limits for it, and the
site's robots.txt as one process fetched it for everyone. Decisions are the pure rules of
`resources/host_rules.py`. The lease's grants, renewals, releases and requests are each one
conditional write whose filter states the rule (`host_filters.py`), so nothing is read first;
where a filter does not match, and for every other change, the document is read, the rule
decides on it, and the change is written by compare-and-set on `version`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from crawlsched.resources import host_rules
from crawlsched.resources.host_rules import Granted, HostPolicy, Refused, Renewed
from crawlsched.store import host_filters
from crawlsched.store.counting import CountingDatabase
from crawlsched.store.host_docs import counted_pages, effective_policy, state_of

CAS_ATTEMPTS = 16


class MongoHostStore:
    def __init__(self, db: CountingDatabase) -> None:
        self._hosts = db.hosts
        # Each host's own limits and Crawl-delay as last read here: an acquisition states them
        # in its filter, so the slice and budget it computes from them hold (see `acquire`).
        self._limits: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self._hosts.find_one({"_id": key})

    def held(self, key: str, now: datetime) -> bool:
        """Whether some process holds the host right now."""
        return self.held_until(key, now) is not None

    def held_until(self, key: str, now: datetime) -> datetime | None:
        """The end of the live slice some process holds the host for, or None."""
        doc = self.get(key) or {}
        until = doc.get("lease_until")
        return until if doc.get("holder") and until is not None and until > now else None

    def wait_for(self, key: str, holder: str, now: datetime) -> datetime | None:
        """`holder` parks work until another process gives the host back: the end of that
        process's live slice (None: nobody else holds it now). The host is marked wanted on
        the way, in the same one write, so its holder does not renew the slice and its
        release wakes the parked work (`release`): a process that handed the host over at
        its slice's end never asked for it, and would otherwise wait for the clock."""
        taken = {"holder": {"$nin": [None, "", holder]}, "lease_until": {"$gt": now}}
        doc = self._write_if(key, [taken], {"wanted_at": now}, {}, now)
        return doc["lease_until"] if doc is not None else None

    def not_free_until(
        self, keys: Iterable[str], holder: str, now: datetime
    ) -> dict[str, datetime]:
        """Of `keys`, the hosts `holder` could not send to now, with until when: held by
        another process (its slice's end) or blocked. One read for them all."""
        found = {}
        fields = {"holder": 1, "lease_until": 1, "blocked_until": 1}
        for doc in self._hosts.find({"_id": {"$in": list(keys)}}, fields):
            ends = [doc.get("blocked_until")]
            if doc.get("holder") not in (None, holder):
                ends.append(doc.get("lease_until"))
            live = [end for end in ends if isinstance(end, datetime) and end > now]
            if live:
                found[doc["_id"]] = max(live)
        return found

    def list(self) -> list[dict[str, Any]]:
        return list(self._hosts.find({}).sort("_id", 1))

    def _doc(self, key: str, now: datetime) -> dict[str, Any]:
        doc = self.get(key)
        if doc is None:
            with contextlib.suppress(DuplicateKeyError):  # another process made it first
                self._hosts.insert_one({"_id": key, "version": 0, "created_at": now})
            doc = self.get(key) or {"_id": key, "version": 0}
        self._learn(key, doc)
        return doc

    def _learn(self, key: str, doc: dict[str, Any]) -> None:
        if len(self._limits) >= 10_000:
            self._limits.clear()
        self._limits[key] = host_filters.limits_of(doc)

    def _change(
        self, key: str, now: datetime, decide: Callable[[dict[str, Any]], dict | None]
    ) -> dict[str, Any] | None:
        """Apply `decide(doc)` (fields to set, or None for no change) on a fresh read, by
        compare-and-set on its version; the document as it was read when the change went in
        (or when nothing was to change)."""
        for _ in range(CAS_ATTEMPTS):
            doc = self._doc(key, now)
            fields = decide(doc)
            if fields is None:
                return doc
            done = self._hosts.update_one(
                {"_id": key, "version": doc.get("version")},
                {"$set": {**fields, "updated_at": now}, "$inc": {"version": 1}},
            )
            if done.modified_count == 1:
                return doc
        raise RuntimeError(f"host {key}: too many concurrent changes")

    def _write_if(
        self, key: str, conditions: list[dict[str, Any]], fields: dict, inc: dict, now: datetime
    ) -> dict[str, Any] | None:
        """One conditional write, no read: `fields` set and `inc` added where the host's
        document meets every condition; the document after it, or None (nothing matched)."""
        stated = [condition for condition in conditions if condition]
        doc = self._hosts.find_one_and_update(
            {"_id": key, "$and": stated} if stated else {"_id": key},
            {"$set": {**fields, "updated_at": now}, "$inc": {**inc, "version": 1}},
            return_document=ReturnDocument.AFTER,
        )
        if doc is not None:
            self._learn(key, doc)
        return doc

    # -- the lease ------------------------------------------------------------------------------

    def acquire(
        self,
        key: str,
        holder: str,
        policy: HostPolicy,
        now: datetime,
        slice_s: float,
        held_elsewhere: bool = False,
    ) -> tuple[Granted | Refused, HostPolicy]:
        """Take the host for one slice, or learn until when not (and why). Returns the
        decision and the policy in force (the host's own limits and its robots.txt
        `Crawl-delay` laid over `policy`).

        A grant is one conditional write stating the rule (`host_filters.grantable`) and the
        host's limits as last read here. When it does not match, a second one marks the host
        wanted where another live holder is all that stands in the way (the refusal then read
        from what it returns); only when neither matches is the document read, to learn why or
        to try again with its real limits. `held_elsewhere`: the caller was refused for a
        holder whose slice has not ended, so the second write goes first (a refusal in one
        command; when it does not match, the grant is tried as usual)."""
        limits = self._limits.get(key, {})
        if held_elsewhere:
            effective = effective_policy(limits, policy)
            wanted = host_filters.held_elsewhere(holder, effective, now)
            same = host_filters.same_limits(limits)
            if (
                doc := self._write_if(key, [wanted, same], {"wanted_at": now}, {}, now)
            ) is not None:
                slice_for = max(slice_s, 3 * effective.delay_s)
                decision = host_rules.decide(state_of(doc), effective, holder, now, slice_for)
                if not isinstance(decision, Granted):  # (held elsewhere: the write's condition)
                    return decision, effective
        for _ in range(CAS_ATTEMPTS):
            effective = effective_policy(limits, policy)
            # A slice always fits a few requests, however long the host's delay.
            slice_for = max(slice_s, 3 * effective.delay_s)
            until = now + timedelta(seconds=slice_for)
            fields = {"holder": holder, "lease_until": until, "lease_granted_at": now}
            fields.update(wanted_at=None, in_flight=0, in_flight_at=now)
            same = host_filters.same_limits(limits)
            doc = self._write_if(
                key, [host_filters.grantable(holder, effective, now), same], fields, {}, now
            )
            if doc is not None:
                state = state_of(doc)
                first = max(now, state.next_start) if state.next_start else now
                left = host_rules.pages_left(state, effective, now)
                return Granted(until, first, left), effective
            # (a later request for the host stands for an earlier one: either came after the
            # holder's grant, which is what stops its renewals)
            wanted = host_filters.held_elsewhere(holder, effective, now)
            doc = self._write_if(key, [wanted, same], {"wanted_at": now}, {}, now)
            if doc is None:
                doc = self._doc(key, now)
            limits, effective = host_filters.limits_of(doc), effective_policy(doc, policy)
            decision = host_rules.decide(state_of(doc), effective, holder, now, slice_for)
            if isinstance(decision, Granted):
                continue  # its limits were not the ones known here, or it was freed since
            if decision.held and doc.get("wanted_at") is None:
                self._hosts.update_one(
                    {"_id": key, "holder": doc.get("holder"), "wanted_at": None},
                    {"$set": {"wanted_at": now}, "$inc": {"version": 1}},
                )
            return decision, effective
        raise RuntimeError(f"host {key}: too many concurrent changes")

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
        fields: dict[str, Any] = {"lease_until": until}
        fields.update(in_flight=max(int(in_flight), 0), in_flight_at=now)
        if next_start is not None:
            fields["next_start"] = next_start
        today, inc = host_filters.counted_today(pages, now)
        conditions = [host_filters.renewable(holder, now), today]
        if (doc := self._write_if(key, conditions, fields, inc, now)) is not None:
            return Renewed(until, self._pages_left(doc, policy, now))
        # Not renewed in one write: lost, wanted, or a new day to count. The rule decides on
        # a fresh read.
        renewed: list[Renewed] = []

        def decide(doc: dict[str, Any]) -> dict | None:
            renewed.clear()  # (a decision whose write lost its compare-and-set is not one)
            if not host_rules.may_renew(state_of(doc), holder, now):
                return None
            counted = counted_pages(doc, pages, now)
            renewed.append(Renewed(until, self._pages_left({**doc, **counted}, policy, now)))
            return {**fields, **counted}

        self._change(key, now, decide)
        return renewed[0] if renewed else None

    @staticmethod
    def _pages_left(doc: dict[str, Any], policy: HostPolicy | None, now: datetime) -> int | None:
        if policy is None:
            return None
        return host_rules.pages_left(state_of(doc), effective_policy(doc, policy), now)

    def release(
        self, key: str, holder: str, next_start: datetime | None, pages: int, now: datetime
    ) -> bool:
        """Give the host back (the rest of the slice unused): the next holder starts no earlier
        than `next_start`; `pages` requests were sent in the slice. One write, no read, when
        this holder still holds it; else decided on a fresh read.

        True when another process asked for the host since it was last granted (`wanted_at`,
        which only a grant clears): only then may a batch wait for its release. A batch that
        waits for a host always asked for it first, and also has a wake-up at the slice's
        end, so a release nobody asked for needs no wake pass."""
        freed = {"holder": None, "lease_until": now, "in_flight": 0, "in_flight_at": now}
        today, inc = host_filters.counted_today(pages, now)
        conditions = [{"holder": holder}, today]
        if next_start is not None:
            conditions.append(host_filters.no_later_start(next_start))
            freed["next_start"] = next_start
        if (doc := self._write_if(key, conditions, freed, inc, now)) is not None:
            return doc.get("wanted_at") is not None

        def decide(doc: dict[str, Any]) -> dict | None:
            fields = counted_pages(doc, pages, now)
            if next_start is not None:
                known = doc.get("next_start")
                fields["next_start"] = max(next_start, known) if known else next_start
            if doc.get("holder") == holder:
                fields.update(holder=None, lease_until=now, in_flight=0, in_flight_at=now)
            return fields

        doc = self._change(key, now, decide)
        return doc is None or doc.get("wanted_at") is not None

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
