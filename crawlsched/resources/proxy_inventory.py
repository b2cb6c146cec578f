"""MongoProxyInventory: the proxy pool (`proxies`), the accounts' bindings to proxies, and each
domain's proxy tier (`proxy_tiers`).

A proxy's password is encrypted like an account's secret and read only by the worker that
holds a lease on the proxy, to send to the proxy itself. Every change bumps the document's
`version`, so a lease decided on the old state loses its compare-and-set.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from pymongo import ReturnDocument

from crawlsched.errors import AccountNotFound, ProxyNotFound
from crawlsched.resources import rules
from crawlsched.resources.proxy_health import (
    ACTIVE,
    SCHEMES,
    Backoff,
    answered_fields,
    failed_fields,
    proxy_state,
)
from crawlsched.resources.proxy_tiers import (
    TierPolicy,
    TierState,
    after_answer,
    after_block,
    probe_taken,
    tier_to_try,
)
from crawlsched.resources.secrets import SecretBox
from crawlsched.store.counting import CountingDatabase

PUBLIC_PROXY_FIELDS = {"secret_enc": 0}
NAME_CHARS = 100
CAS_ATTEMPTS = 8  # re-reads after a lost compare-and-set (each loss: someone progressed)


def proxy_address(url: str) -> str:
    """`scheme://host:port` of a proxy URL, checked; ValueError saying what is wrong. Its
    credentials are given apart (`--username`, a password on stdin), never in the URL, so
    that they cannot leak into a listing or a log."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as e:
        raise ValueError(f"not a proxy URL: {e}") from None
    if parts.scheme not in SCHEMES:
        raise ValueError(f"a proxy URL's scheme must be one of {', '.join(SCHEMES)}")
    if parts.username or parts.password:
        raise ValueError(
            "give a proxy's credentials with --username and a password, not in its URL"
        )
    if not parts.hostname or port is None:
        raise ValueError("a proxy URL needs a host and a port: scheme://host:port")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError("a proxy URL is scheme://host:port, without a path")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port}"


def _check_name(kind: str, name: str) -> None:
    if (
        not name
        or len(name) > NAME_CHARS
        or not name.replace("-", "").replace("_", "").replace(".", "").isalnum()
    ):
        raise ValueError(f"a {kind} name is 1 to {NAME_CHARS} letters, digits, '.', '-' or '_'")


class MongoProxyInventory:
    def __init__(
        self,
        db: CountingDatabase,
        secrets: SecretBox,
        backoff: Backoff | None = None,
        tiers: TierPolicy | None = None,
    ) -> None:
        self._db = db
        self._secrets = secrets
        self.backoff = backoff or Backoff()
        self.tier_policy = tiers or TierPolicy()

    # -- the pool -----------------------------------------------------------------------------

    def add_proxy(
        self,
        name: str,
        url: str,
        now: datetime,
        group: str = "default",
        tier: int = 0,
        max_concurrent: int = 1,
        username: str | None = None,
        password: str | None = None,
    ) -> bool:
        """Add a proxy, or change one (its leases stay); True if it was new."""
        _check_name("proxy", name)
        _check_name("group", group)
        address = proxy_address(url)
        if not 0 <= tier <= 9:
            raise ValueError(f"tier must be between 0 and 9, got {tier}")
        if not 1 <= max_concurrent <= 1000:
            raise ValueError(f"max_concurrent must be between 1 and 1000, got {max_concurrent}")
        if (username is None) != (password is None):
            raise ValueError("a proxy's username and password go together")
        token = self._secrets.encrypt(password) if password else None  # before any write
        result = self._db.proxies.update_one(
            {"_id": name},
            {
                "$set": {
                    "url": address,
                    "group": group,
                    "tier": tier,
                    "max_concurrent": max_concurrent,
                    "username": username,
                    "secret_enc": token,
                    "updated_at": now,
                },
                "$setOnInsert": {
                    "enabled": True,
                    "failures": 0,
                    "cooling_until": None,
                    "status_reason": None,
                    "leases": [],
                    "last_leased_at": None,
                    "created_at": now,
                },
                "$inc": {"version": 1},
            },
            upsert=True,
        )
        return result.upserted_id is not None

    def proxies(self, group: str | None = None) -> list[dict[str, Any]]:
        query = {} if group is None else {"group": group}
        return list(self._db.proxies.find(query, PUBLIC_PROXY_FIELDS).sort("_id", 1))

    def proxy(self, name: str) -> dict[str, Any]:
        doc = self._db.proxies.find_one({"_id": name}, PUBLIC_PROXY_FIELDS)
        if doc is None:
            raise ProxyNotFound(name)
        return doc

    def set_enabled(self, name: str, enabled: bool, now: datetime) -> dict[str, Any]:
        """Enable (also ends a rest: an operator's "it works now") or disable a proxy."""
        fields: dict[str, Any] = {"enabled": enabled, "updated_at": now}
        if enabled:
            fields.update(cooling_until=None, failures=0, status_reason=None)
        doc = self._db.proxies.find_one_and_update(
            {"_id": name},
            {"$set": fields, "$inc": {"version": 1}},
            projection=PUBLIC_PROXY_FIELDS,
            return_document=ReturnDocument.AFTER,
        )
        if doc is None:
            raise ProxyNotFound(name)
        return doc

    def remove_proxy(self, name: str) -> int:
        """Forget a proxy and unbind the accounts bound to it; how many were unbound. Batches
        going out through it lose their lease and go back to wait."""
        if self._db.proxies.delete_one({"_id": name}).deleted_count == 0:
            raise ProxyNotFound(name)
        return self._db.accounts.update_many(
            {"proxy_binding.proxy": name},
            {"$set": {"proxy_binding": None}, "$inc": {"version": 1}},
        ).modified_count

    # -- health, reported by the batches going out through a proxy ---------------------------

    def failed_by_lease(self, lease_id: str, reason: str, now: datetime) -> dict | None:
        """The proxy behind this lease refused, stalled or was blocked: it rests (backoff).
        Returns the proxy as it is now, None if no proxy holds the lease."""
        for _ in range(CAS_ATTEMPTS):
            doc = self._db.proxies.find_one({"leases.id": lease_id}, PUBLIC_PROXY_FIELDS)
            if doc is None:
                return None
            fields = failed_fields(doc, reason, now, self.backoff)
            result = self._db.proxies.update_one(
                {"_id": doc["_id"], "version": doc.get("version")},
                {"$set": fields, "$inc": {"version": 1}},
            )
            if result.modified_count == 1:
                return {**doc, **fields}
        return None

    def answered_by_lease(self, lease_id: str, now: datetime) -> None:
        """A page was fetched through the proxy behind this lease: its failures start over."""
        self._db.proxies.update_one(
            {"leases.id": lease_id, "failures": {"$gt": 0}},
            {"$set": answered_fields(now), "$inc": {"version": 1}},
        )

    # -- bindings -----------------------------------------------------------------------------

    def bind_account(
        self,
        media_name: str,
        username: str,
        proxy: str | None,
        group: str | None,
        now: datetime,
    ) -> dict[str, Any]:
        """Bind an account to one proxy or a group (both None: unbind). The proxy or group
        must exist. The account keeps its kept proxy only if the new binding admits it."""
        if proxy is not None and group is not None:
            raise ValueError("bind an account to a proxy or to a group, not both")
        binding = None
        if proxy is not None:
            self.proxy(proxy)
            binding = {"proxy": proxy}
        elif group is not None:
            if self._db.proxies.count_documents({"group": group}) == 0:
                raise ValueError(f"no proxy is in group {group!r} (see `crawlsched proxies list`)")
            binding = {"group": group}
        doc = self._db.accounts.find_one_and_update(
            {"media_name": media_name, "username": username},
            {
                "$set": {"proxy_binding": binding, "updated_at": now},
                "$inc": {"version": 1},
            },
            projection={"secret_enc": 0, "session": 0},
            return_document=ReturnDocument.AFTER,
        )
        if doc is None:
            raise AccountNotFound(media_name, username)
        return doc

    # -- tiers --------------------------------------------------------------------------------

    def tiers_of(self, group: str | None) -> list[int]:
        query: dict[str, Any] = {"enabled": True}
        if group is not None:
            query["group"] = group
        return sorted({int(p.get("tier") or 0) for p in self._db.proxies.find(query, {"tier": 1})})

    def tier_state(self, domain: str) -> TierState:
        return TierState.of(self._db.proxy_tiers.find_one({"_id": domain}))

    def tier_for(self, domain: str, group: str | None, now: datetime) -> int:
        """The tier a new batch of this domain goes out on; a due probe is taken by one batch."""
        for _ in range(CAS_ATTEMPTS):
            doc = self._db.proxy_tiers.find_one({"_id": domain})
            state = TierState.of(doc)
            tier, probe = tier_to_try(state, self.tiers_of(group), now)
            if not probe:
                return tier
            if self._write_tier(domain, doc, probe_taken(state, now, self.tier_policy), now):
                return tier
        return tier_to_try(self.tier_state(domain), self.tiers_of(group), now)[0]

    def record_tier(
        self, domain: str, group: str | None, used: int, blocked: bool, now: datetime
    ) -> TierState:
        """A batch's answer on tier `used`: a block counts toward escalation (or fails a
        probe), an answer ends a probe well. Returns the domain's state now."""
        rule = after_block if blocked else after_answer
        for _ in range(CAS_ATTEMPTS):
            doc = self._db.proxy_tiers.find_one({"_id": domain})
            state = TierState.of(doc)
            new = rule(state, used, self.tiers_of(group), now, self.tier_policy)
            if new == state or self._write_tier(domain, doc, new, now):
                return new
        return self.tier_state(domain)

    def _write_tier(self, domain: str, doc: dict | None, state: TierState, now: datetime) -> bool:
        fields = {**state.fields(), "updated_at": now}
        if doc is None:
            result = self._db.proxy_tiers.update_one(
                {"_id": domain}, {"$setOnInsert": {**fields, "version": 1}}, upsert=True
            )
            return result.upserted_id is not None
        result = self._db.proxy_tiers.update_one(
            {"_id": domain, "version": doc.get("version")},
            {"$set": fields, "$inc": {"version": 1}},
        )
        return result.modified_count == 1

    def tiers(self) -> list[dict[str, Any]]:
        return list(self._db.proxy_tiers.find({}).sort("_id", 1))

    def overview(self, now: datetime) -> dict[str, int]:
        proxies = self.proxies()
        return {
            "resources": len(proxies),
            "usable": sum(proxy_state(p, now) == ACTIVE for p in proxies),
            "capacity": sum(rules.capacity_of(rules.PROXY_POOL, p) for p in proxies),
            "held": rules.held_by(proxies, now),
        }
