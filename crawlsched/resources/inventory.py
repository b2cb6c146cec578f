"""MongoPoolInventory: what the pools hold — accounts and Selenium nodes — and their health.

Every change bumps the resource's `version`, so a lease decision taken on the old state by a
concurrent worker loses its compare-and-set and is taken again on the new one (a banned account
is never leased "just this once").
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pymongo import ReturnDocument

from crawlsched.errors import AccountNotFound, NodeNotFound
from crawlsched.resources import rules
from crawlsched.resources.rules import ACCOUNT_STATUSES, DOWN, UP, AccountLimits
from crawlsched.resources.secrets import SecretBox
from crawlsched.store.counting import CountingDatabase

PUBLIC_ACCOUNT_FIELDS = {"secret_enc": 0, "session": 0}


class MongoPoolInventory:
    def __init__(self, db: CountingDatabase, secrets: SecretBox) -> None:
        self._db = db
        self._secrets = secrets

    # -- accounts ---------------------------------------------------------------------------

    def add_account(
        self, media_name: str, username: str, secret: str, limits: AccountLimits, now: datetime
    ) -> bool:
        """Add an account, or update its secret and limits; True if it was new."""
        if not username or len(username) > 200:
            raise ValueError("username must be 1 to 200 characters")
        token = self._secrets.encrypt(secret)  # before any write: nothing half stored
        result = self._db.accounts.update_one(
            {"media_name": media_name, "username": username},
            {
                "$set": {
                    "secret_enc": token,
                    "max_concurrent": limits.max_concurrent,
                    "cooldown_s": limits.cooldown_s,
                    "rate_uses": limits.rate_uses,
                    "rate_window_s": limits.rate_window_s,
                    "updated_at": now,
                },
                "$setOnInsert": {
                    "status": rules.ACTIVE,
                    "status_reason": None,
                    "leases": [],
                    "last_leased_at": None,
                    "cooling_until": None,
                    "created_at": now,
                },
                "$inc": {"version": 1},
            },
            upsert=True,
        )
        return result.upserted_id is not None

    def accounts(self, media_name: str | None = None) -> list[dict[str, Any]]:
        query = {} if media_name is None else {"media_name": media_name}
        return list(
            self._db.accounts.find(query, PUBLIC_ACCOUNT_FIELDS).sort(
                [("media_name", 1), ("username", 1)]
            )
        )

    def set_account_status(
        self, media_name: str, username: str, status: str, reason: str | None, now: datetime
    ) -> dict[str, Any]:
        """The account as it is now, with `previous_status` (what it was before this change)."""
        if status not in ACCOUNT_STATUSES:
            raise ValueError(f"unknown account status {status!r}; known: {ACCOUNT_STATUSES}")
        fields: dict[str, Any] = {"status": status, "status_reason": reason, "status_at": now}
        if status == rules.ACTIVE:
            # An operator's "enable" means usable now, for every task; a session the site
            # saw before a ban is not worth keeping.
            fields.update(cooling_until=None, task_locks={}, session=None)
        before = self._db.accounts.find_one_and_update(
            {"media_name": media_name, "username": username},
            {"$set": fields, "$inc": {"version": 1}},
            projection=PUBLIC_ACCOUNT_FIELDS,
            return_document=ReturnDocument.BEFORE,
        )
        if before is None:
            raise AccountNotFound(media_name, username)
        version = int(before.get("version") or 0) + 1
        return {**before, **fields, "version": version, "previous_status": before.get("status")}

    def ban_by_lease(self, lease_id: str, reason: str, now: datetime) -> dict | None:
        """The site rejected this account's login: no lease for it until an operator enables it.
        Returns the account as it was before (None: no account holds the lease)."""
        return self._db.accounts.find_one_and_update(
            {"leases.id": lease_id},
            {
                "$set": {"status": rules.BANNED, "status_reason": reason[:300], "status_at": now},
                "$inc": {"version": 1},
            },
            projection=PUBLIC_ACCOUNT_FIELDS,
            return_document=ReturnDocument.BEFORE,
        )

    def cool_by_lease(self, lease_id: str, until: datetime, reason: str) -> dict | None:
        """The site rate-limited this account until `until`: it cools down until then."""
        return self._db.accounts.find_one_and_update(
            {"leases.id": lease_id},
            {
                "$set": {"cooling_until": until, "status_reason": reason[:300]},
                "$inc": {"version": 1},
            },
            projection=PUBLIC_ACCOUNT_FIELDS,
        )

    def lock_task_by_lease(
        self, lease_id: str, task: str, until: datetime, reason: str
    ) -> dict | None:
        """The site rate-limited this account on `task` until `until`: no lease for that task
        until then; its other tasks go on."""
        return self._db.accounts.find_one_and_update(
            {"leases.id": lease_id},
            {
                "$max": {f"task_locks.{task}": until},
                "$set": {"status_reason": reason[:300]},
                "$inc": {"version": 1},
            },
            projection=PUBLIC_ACCOUNT_FIELDS,
        )

    # -- nodes ------------------------------------------------------------------------------

    def add_node(self, url: str, kind: str, capacity: int, now: datetime) -> bool:
        """Add a node (probed healthy by the caller), or update its capacity; True if new."""
        if capacity < 1 or capacity > 1000:
            raise ValueError(f"capacity must be between 1 and 1000, got {capacity}")
        result = self._db.selenium_nodes.update_one(
            {"_id": url},
            {
                "$set": {
                    "url": url,
                    "kind": kind,
                    "capacity": capacity,
                    "enabled": True,
                    "draining": False,
                    "health": UP,
                    "health_reason": None,
                    "checked_at": now,
                },
                "$setOnInsert": {"leases": [], "last_leased_at": None, "created_at": now},
                "$inc": {"version": 1},
            },
            upsert=True,
        )
        return result.upserted_id is not None

    def nodes(self) -> list[dict[str, Any]]:
        return list(self._db.selenium_nodes.find({}).sort("_id", 1))

    def node(self, url: str) -> dict[str, Any]:
        doc = self._db.selenium_nodes.find_one({"_id": url})
        if doc is None:
            raise NodeNotFound(url)
        return doc

    def set_draining(self, url: str, draining: bool) -> dict[str, Any]:
        doc = self._db.selenium_nodes.find_one_and_update(
            {"_id": url},
            {"$set": {"draining": draining}, "$inc": {"version": 1}},
            return_document=ReturnDocument.AFTER,
        )
        if doc is None:
            raise NodeNotFound(url)
        return doc

    def remove_node(self, url: str) -> None:
        """Forget a node. Batches running on it lose their lease and go back to wait."""
        if self._db.selenium_nodes.delete_one({"_id": url}).deleted_count == 0:
            raise NodeNotFound(url)

    def due_for_probe(self, now: datetime, interval_s: float) -> list[dict[str, Any]]:
        """Enabled nodes last checked at least `interval_s` ago (or never)."""
        cutoff = now - timedelta(seconds=interval_s)
        return list(
            self._db.selenium_nodes.find(
                {
                    "enabled": True,
                    "$or": [{"checked_at": None}, {"checked_at": {"$lte": cutoff}}],
                },
                {"leases": 0},
            )
        )

    def claim_probe(self, node: dict[str, Any], now: datetime) -> bool:
        """Only one of several tickers probes a node per interval."""
        result = self._db.selenium_nodes.update_one(
            {"_id": node["_id"], "checked_at": node.get("checked_at")},
            {"$set": {"checked_at": now}},
        )
        return result.modified_count == 1

    def mark_node(
        self, url: str, healthy: bool, reason: str | None, now: datetime, capacity: int | None
    ) -> tuple[str | None, list[dict[str, Any]]]:
        """Record a probe; a node found down loses its leases. Returns (old health, revoked)."""
        fields: dict[str, Any] = {
            "health": UP if healthy else DOWN,
            "health_reason": None if healthy else (reason or "")[:300],
            "checked_at": now,
        }
        if capacity is not None:
            fields["capacity"] = capacity
        if not healthy:
            fields["leases"] = []  # revoked: their batches notice on renewal and wait again
        before = self._db.selenium_nodes.find_one_and_update(
            {"_id": url},
            {"$set": fields, "$inc": {"version": 1}},
            return_document=ReturnDocument.BEFORE,
        )
        if before is None:
            return None, []
        revoked = [] if healthy else rules.live_leases(before, now)
        return before.get("health"), revoked

    def overview(self, now: datetime) -> dict[str, dict[str, int]]:
        accounts = self.accounts()
        nodes = self.nodes()
        return {
            rules.ACCOUNT_POOL: {
                "resources": len(accounts),
                "usable": sum(rules.account_state(a, now) == rules.ACTIVE for a in accounts),
                "capacity": sum(rules.capacity_of(rules.ACCOUNT_POOL, a) for a in accounts),
                "held": rules.held_by(accounts, now),
            },
            rules.SELENIUM_POOL: {
                "resources": len(nodes),
                "usable": sum(rules.node_state(n) == UP for n in nodes),
                "capacity": sum(
                    rules.capacity_of(rules.SELENIUM_POOL, n)
                    for n in nodes
                    if rules.node_state(n) == UP
                ),
                "held": rules.held_by(nodes, now),
            },
        }
