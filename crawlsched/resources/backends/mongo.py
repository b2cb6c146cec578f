"""MongoLeaseBackend: resources as documents, each lease a conditional update on its resource.

Collections: `accounts` (media_name, username, secret, enabled) and `selenium_nodes` (url, slot,
enabled), each with an embedded `lease` {id, holder, expires_at} or null. Holding the lease on
the resource document itself makes acquire a single atomic find-and-modify.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pymongo import ASCENDING, ReturnDocument

from crawlsched.resources.rules import (
    ACCOUNT_POOL,
    SELENIUM_POOL,
    Lease,
    expiry,
    new_lease_id,
    pool_of,
)
from crawlsched.store.counting import CountingDatabase

POOL_COLLECTIONS = {ACCOUNT_POOL: "accounts", SELENIUM_POOL: "selenium_nodes"}


def _free(now: datetime) -> dict[str, Any]:
    return {"$or": [{"lease": None}, {"lease.expires_at": {"$lte": now}}]}


class MongoLeaseBackend:
    def __init__(self, db: CountingDatabase) -> None:
        self._db = db

    def _collection(self, pool: str):
        return self._db[POOL_COLLECTIONS[pool]]

    def create_indexes(self) -> None:
        for pool in POOL_COLLECTIONS:
            coll = self._collection(pool)
            coll.create_index([("lease.id", ASCENDING)], name="lease_id", sparse=True)
            coll.create_index(
                [("enabled", ASCENDING), ("last_leased_at", ASCENDING)], name="free_lru"
            )
        self._db.accounts.create_index(
            [("media_name", ASCENDING), ("username", ASCENDING)], unique=True, name="media_user"
        )

    def try_acquire(
        self, pool: str, selector: Mapping[str, Any], holder: str, ttl_s: float, now: datetime
    ) -> Lease | None:
        lease_id = new_lease_id(pool)
        expires_at = expiry(now, ttl_s)
        doc = self._collection(pool).find_one_and_update(
            {**selector, "enabled": True, **_free(now)},
            {
                "$set": {
                    "lease": {"id": lease_id, "holder": holder, "expires_at": expires_at},
                    "last_leased_at": now,
                }
            },
            sort=[("last_leased_at", ASCENDING)],
            projection={"_id": 1},
            return_document=ReturnDocument.AFTER,
        )
        if doc is None:
            return None
        return Lease(lease_id, pool, doc["_id"], holder, expires_at)

    def release(self, lease_id: str) -> bool:
        result = self._collection(pool_of(lease_id)).update_one(
            {"lease.id": lease_id}, {"$set": {"lease": None}}
        )
        return result.modified_count == 1

    def renew(self, lease_id: str, ttl_s: float, now: datetime) -> bool:
        result = self._collection(pool_of(lease_id)).update_one(
            {"lease.id": lease_id, "lease.expires_at": {"$gt": now}},
            {"$set": {"lease.expires_at": expiry(now, ttl_s)}},
        )
        return result.modified_count == 1

    def secret(self, lease_id: str, now: datetime) -> str | None:
        doc = self._db.accounts.find_one(
            {"lease.id": lease_id, "lease.expires_at": {"$gt": now}}, {"secret": 1}
        )
        return None if doc is None else doc.get("secret")

    def held(self, pool: str, now: datetime) -> int:
        return self._collection(pool).count_documents({"lease.expires_at": {"$gt": now}})

    def expire(self, now: datetime) -> int:
        cleared = 0
        for pool in POOL_COLLECTIONS:
            cleared += (
                self._collection(pool)
                .update_many({"lease.expires_at": {"$lte": now}}, {"$set": {"lease": None}})
                .modified_count
            )
        return cleared

    # -- managing the pools -----------------------------------------------------------------

    def add_account(self, media_name: str, username: str, secret: str) -> None:
        self._db.accounts.update_one(
            {"media_name": media_name, "username": username},
            {
                "$set": {"secret": secret, "enabled": True},
                "$setOnInsert": {"lease": None, "last_leased_at": None},
            },
            upsert=True,
        )

    def add_node(self, url: str, slots: int = 1) -> None:
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        for slot in range(slots):
            self._db.selenium_nodes.update_one(
                {"_id": f"{url}#{slot}"},
                {
                    "$set": {"url": url, "slot": slot, "enabled": True},
                    "$setOnInsert": {"lease": None, "last_leased_at": None},
                },
                upsert=True,
            )

    def overview(self, now: datetime) -> dict[str, dict[str, int]]:
        out = {}
        for pool in POOL_COLLECTIONS:
            coll = self._collection(pool)
            out[pool] = {
                "total": coll.count_documents({}),
                "enabled": coll.count_documents({"enabled": True}),
                "held": self.held(pool, now),
            }
        return out
