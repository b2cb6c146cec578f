"""MongoLeaseBackend: resources as documents holding their live leases, changed by compare-and-set.

Collections: `accounts` (one document per login), `selenium_nodes` (one per node URL) and
`proxies` (one per proxy name). Each holds `leases: [{id, holder, run_id, media_name,
expires_at}]` (an account's also `task` and `proxy_id`) and a `version`. Every decision is
taken by the pure rules in `resources/rules.py` on a snapshot and written back only if the
version is unchanged, so two workers can never both fill the last slot. A conflict means someone
else changed that resource: read again and decide again (bounded).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from pymongo import ASCENDING

from crawlsched.resources import rules
from crawlsched.resources.rules import ACCOUNT_POOL, PROXY_POOL, SELENIUM_POOL, Lease
from crawlsched.resources.secrets import SecretBox
from crawlsched.store.counting import CountingDatabase

POOL_COLLECTIONS = {
    ACCOUNT_POOL: "accounts",
    SELENIUM_POOL: "selenium_nodes",
    PROXY_POOL: "proxies",
}
# Re-reads after a lost compare-and-set. Each loss means another worker made progress, so a
# small bound is enough; past it the caller treats the pool as short and waits for a wake-up.
CAS_ATTEMPTS = 16
POOLS_ALL = tuple(POOL_COLLECTIONS)
# What a resource read for a decision never carries: its secret and an account's kept session.
HIDDEN = {"secret_enc": 0, "session": 0}


class MongoLeaseBackend:
    def __init__(self, db: CountingDatabase, secrets: SecretBox | None = None) -> None:
        self._db = db
        self.secrets = secrets or SecretBox(None)
        # Every lease operation names its pool's collection: look each up once.
        self._collections = {pool: db[name] for pool, name in POOL_COLLECTIONS.items()}

    def collection(self, pool: str):
        return self._collections[pool]

    def create_indexes(self) -> None:
        for pool in POOL_COLLECTIONS:
            self.collection(pool).create_index([("leases.id", ASCENDING)], name="lease_id")
            self.collection(pool).create_index([("leases.holder", ASCENDING)], name="holder")
        self._db.accounts.create_index(
            [("media_name", ASCENDING), ("username", ASCENDING)], unique=True, name="media_user"
        )
        self._db.proxies.create_index([("group", ASCENDING)], name="group")

    # -- the compare-and-set every change goes through -------------------------------------

    def _cas(self, pool: str, doc: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
        result = self.collection(pool).update_one(
            {"_id": doc["_id"], "version": doc.get("version")},
            {"$set": dict(fields), "$inc": {"version": 1}},
        )
        return result.modified_count == 1

    def _change_lease(
        self, lease_id: str, decide: Callable[[dict], dict | None]
    ) -> dict[str, Any] | None:
        """Apply `decide(doc)` to the resource holding `lease_id`; the resource as it was read
        (without its secret) when the change took, None if there was nothing to do."""
        pool = rules.pool_of(lease_id)
        for _ in range(CAS_ATTEMPTS):
            doc = self.collection(pool).find_one({"leases.id": lease_id}, HIDDEN)
            if doc is None:
                return None
            fields = decide(doc)
            if fields is None:
                return None
            if self._cas(pool, doc, fields):
                return doc
        raise RuntimeError(f"lease {lease_id}: gave up after {CAS_ATTEMPTS} conflicting writes")

    # -- leases -----------------------------------------------------------------------------

    def try_acquire(
        self,
        pool: str,
        selector: Mapping[str, Any],
        holder: str,
        ttl_s: float,
        now: datetime,
        run_id: str = "",
        media_name: str = "",
    ) -> Lease | None:
        """Lease the best free resource of `pool` matching `selector`, or None if none is free."""
        for _ in range(CAS_ATTEMPTS):
            docs = self.docs(pool, selector)
            candidates = rules.choose(pool, docs, now)
            if not candidates:
                return None
            for doc in candidates:
                lease = self.grant(pool, doc, holder, ttl_s, now, run_id, media_name)
                if lease is not None:
                    return lease
        return None

    def docs(self, pool: str, selector: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The pool's resources matching `selector`, as they are now (never a secret)."""
        return list(self.collection(pool).find(dict(selector), HIDDEN))

    def grant(
        self,
        pool: str,
        doc: Mapping[str, Any],
        holder: str,
        ttl_s: float,
        now: datetime,
        run_id: str = "",
        media_name: str = "",
        task: str = "",
        proxy_id: str | None = None,
    ) -> Lease | None:
        """Lease this resource as read in `doc`, if nobody changed it since (compare-and-set
        on its version); None otherwise. The caller decided on `doc` with the rules
        (`rules.refusal`, `bindings.pairs`): the version makes that decision still hold."""
        lease: dict[str, Any] = {
            "id": rules.new_lease_id(pool),
            "holder": holder,
            "run_id": run_id,
            "media_name": media_name,
            "expires_at": rules.expiry(now, ttl_s),
        }
        if pool == ACCOUNT_POOL and (task or proxy_id):
            lease.update(task=task, proxy_id=proxy_id)
        if not self._cas(pool, doc, rules.grant_fields(pool, doc, lease, now)):
            return None
        return Lease(
            lease["id"], pool, doc["_id"], holder, lease["expires_at"], run_id,
            rules.label_of(doc), proxy_id,
        )  # fmt: skip

    def release(self, lease_id: str, now: datetime) -> bool:
        """Free the slot if this lease still holds it; False if it had already gone.

        One atomic write, no read: the lease is pulled, the version bumped (so a grant decided
        on the old list loses its compare-and-set) and `last_released_at` moved forward, from
        which the rules derive an account's cooldown.
        """
        result = self.collection(rules.pool_of(lease_id)).update_one(
            {"leases.id": lease_id},
            {
                "$pull": {"leases": {"id": lease_id}},
                "$inc": {"version": 1},
                "$max": {"last_released_at": now},
            },
        )
        return result.modified_count == 1

    def renew(self, lease_id: str, ttl_s: float, now: datetime) -> bool:
        """Push the expiry back if this lease still holds the resource and has not expired."""
        return self.renew_holding(lease_id, ttl_s, now) is not None

    def renew_holding(self, lease_id: str, ttl_s: float, now: datetime) -> str | None:
        """`renew`, answering with what the lease holds (`rules.label_of`: the username or
        the node URL) instead of True, so that its holder needs no other read to name it."""
        doc = self._change_lease(
            lease_id, lambda doc: rules.renew_fields(doc, lease_id, ttl_s, now)
        )
        return None if doc is None else rules.label_of(doc)

    def release_holder(self, holder: str, now: datetime) -> int:
        """Free every lease `holder` still has (what a crashed admission may have left)."""
        released = 0
        for pool in POOL_COLLECTIONS:
            for doc in self.collection(pool).find({"leases.holder": holder}, {"leases": 1}):
                for lease in doc["leases"]:
                    if lease["holder"] == holder:
                        released += self.release(lease["id"], now)
        return released

    def drop_all(self) -> int:
        """Forget every lease of every pool (a standalone restarted after a crash: none of the
        last life's holders is alive). How many resources held any."""
        return sum(
            self.collection(pool)
            .update_many(
                {"leases.0": {"$exists": True}}, {"$set": {"leases": []}, "$inc": {"version": 1}}
            )
            .modified_count
            for pool in POOL_COLLECTIONS
        )

    def resource_of(self, lease_id: str, now: datetime) -> dict | None:
        """The resource a live lease holds (without its secret), or None."""
        return self._held(lease_id, now, HIDDEN)

    def _held(
        self, lease_id: str, now: datetime, projection: Mapping[str, int] | None = None
    ) -> dict | None:
        """The resource `lease_id` holds while that lease is live, else None."""
        doc = self.collection(rules.pool_of(lease_id)).find_one({"leases.id": lease_id}, projection)
        if doc is None or not any(lease["id"] == lease_id for lease in rules.live_leases(doc, now)):
            return None
        return doc

    def secret(self, lease_id: str, now: datetime) -> str | None:
        """The decrypted credential behind a live account lease, or None."""
        found = self.credentials(lease_id, now)
        return None if found is None else found[1]

    def credentials(self, lease_id: str, now: datetime) -> tuple[str, str] | None:
        """(username, decrypted secret) of the account behind a live lease, or None."""
        if rules.pool_of(lease_id) != ACCOUNT_POOL:
            return None
        doc = self._held(lease_id, now)
        token = None if doc is None else doc.get("secret_enc")
        if token is None:
            return None
        return str(doc.get("username", "")), self.secrets.decrypt(token)

    def live_leases(self, now: datetime, pools=POOLS_ALL) -> list[dict[str, Any]]:
        out = []
        for pool in pools:
            for doc in self.collection(pool).find({"leases.0": {"$exists": True}}, {"leases": 1}):
                out.extend(rules.live_leases(doc, now))
        return out

    def held(self, pool: str, now: datetime) -> int:
        docs = self.collection(pool).find({"leases.0": {"$exists": True}}, {"leases": 1})
        return rules.held_by(list(docs), now)

    def expire(self, now: datetime) -> int:
        """Drop expired leases from the documents (they are already free: this tidies the view)."""
        dropped = 0
        for pool in POOL_COLLECTIONS:
            for doc in self.collection(pool).find(
                {"leases.expires_at": {"$lte": now}}, {"leases": 1, "version": 1}
            ):
                live = rules.live_leases(doc, now)
                if self._cas(pool, doc, {"leases": live}):
                    dropped += len(doc["leases"]) - len(live)
        return dropped

    # -- what a lease gives its holder: a proxy's route, an account's kept session ----------

    def proxy_route(self, lease_id: str, now: datetime) -> dict[str, Any] | None:
        """`{name, url, username, password}` of the proxy behind a live lease (its password
        decrypted, for the proxy alone), or None."""
        if rules.pool_of(lease_id) != PROXY_POOL:
            return None
        doc = self._held(lease_id, now)
        if doc is None:
            return None
        token = doc.get("secret_enc")
        return {
            "name": doc["_id"],
            "url": doc["url"],
            "tier": int(doc.get("tier") or 0),
            "username": doc.get("username"),
            "password": self.secrets.decrypt(token) if token else None,
        }

    def session(self, lease_id: str, now: datetime) -> dict[str, Any] | None:
        """The account's kept login session behind a live lease: `{cookies, started_at, uses,
        proxy_id}` (cookies decrypted: `[name, value, domain, path]` rows), or None."""
        if rules.pool_of(lease_id) != ACCOUNT_POOL:
            return None
        kept = (self._held(lease_id, now, {"leases": 1, "session": 1}) or {}).get("session")
        if not kept:
            return None
        return {
            "cookies": self.secrets.decrypt_json(kept["cookies_enc"]).get("cookies") or [],
            "started_at": kept["started_at"],
            "uses": int(kept.get("uses") or 0),
            "proxy_id": kept.get("proxy_id"),
        }

    def keep_session(
        self, lease_id: str, cookies: Mapping[str, str], started_at: datetime, uses: int,
        proxy_id: str | None,
    ) -> bool:  # fmt: skip
        """Store the account's session (encrypted) for its next batches; False if the lease
        has gone (an operator's ban, say, which also drops the session)."""
        if rules.pool_of(lease_id) != ACCOUNT_POOL:
            return False
        session = {
            "cookies_enc": self.secrets.encrypt_json(dict(cookies)),
            "started_at": started_at,
            "uses": uses,
            "proxy_id": proxy_id,
        }
        result = self._db.accounts.update_one(
            {"leases.id": lease_id}, {"$set": {"session": session}}
        )
        return result.modified_count == 1

    def drop_session(self, lease_id: str) -> None:
        if rules.pool_of(lease_id) == ACCOUNT_POOL:
            self._db.accounts.update_one({"leases.id": lease_id}, {"$set": {"session": None}})
