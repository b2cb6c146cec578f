"""Idempotency keys of creating API requests: a retried request gets the first one's answer.

The first request with a key claims it (insert on the unique `_id`) and stores its answer when
done. A retry with the same key and the same request gets that answer again, with nothing done
twice; the same key with another request is refused, as is a retry while the first is still
being answered. Keys are scoped to the token that sent them and kept for a day
(`CRAWLSCHED_RETAIN_IDEMPOTENCY_S`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pymongo.errors import DuplicateKeyError

from crawlsched.store.counting import CountingDatabase

KEEP = timedelta(days=1)


@dataclass(frozen=True)
class Claimed:
    """This request is the first with its key: answer it, then `finish`."""


@dataclass(frozen=True)
class Replay:
    status: int
    body: Any


@dataclass(frozen=True)
class Conflict:
    reason: str  # "in-progress" or "different-request"


def fingerprint(method: str, path: str, body: Any) -> str:
    text = json.dumps([method, path, body], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class MongoIdempotencyStore:
    def __init__(self, db: CountingDatabase, keep: timedelta = KEEP) -> None:
        self._keys = db.idempotency_keys
        self._keep = keep

    def create_indexes(self) -> None:
        self._keys.create_index("expires_at", expireAfterSeconds=0, name="expiry")

    def begin(
        self, scope: str, key: str, request_fingerprint: str, now: datetime
    ) -> Claimed | Replay | Conflict:
        doc_id = f"{scope}:{key}"
        # An expired key is free again (a real server's TTL index removes it within a minute).
        self._keys.delete_one({"_id": doc_id, "expires_at": {"$lte": now}})
        try:
            self._keys.insert_one(
                {
                    "_id": doc_id,
                    "fingerprint": request_fingerprint,
                    "state": "running",
                    "expires_at": now + self._keep,
                }
            )
            return Claimed()
        except DuplicateKeyError:
            pass
        seen = self._keys.find_one({"_id": doc_id}) or {}
        if seen.get("fingerprint") != request_fingerprint:
            return Conflict("different-request")
        if seen.get("state") != "done":
            return Conflict("in-progress")
        return Replay(seen["status"], json.loads(seen["body"]))

    def finish(self, scope: str, key: str, status: int, body: Any) -> None:
        self._keys.update_one(
            {"_id": f"{scope}:{key}"},
            {"$set": {"state": "done", "status": status, "body": json.dumps(body)}},
        )

    def abandon(self, scope: str, key: str) -> None:
        """The request failed before it changed anything: the key may be used again."""
        self._keys.delete_one({"_id": f"{scope}:{key}", "state": "running"})
