"""An in-memory lease backend with the same semantics as the MongoDB one (for tests)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from crawlsched.resources.rules import Lease, expiry, is_free, new_lease_id, pool_of


class MemoryLeaseBackend:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # pool -> resource id -> resource dict (fields as in MongoDB, plus "lease")
        self._resources: dict[str, dict[Any, dict[str, Any]]] = {}

    def add(self, pool: str, resource_id: Any, **fields: Any) -> None:
        with self._lock:
            self._resources.setdefault(pool, {})[resource_id] = {
                "enabled": True,
                "lease": None,
                "last_leased_at": None,
                **fields,
            }

    def try_acquire(
        self, pool: str, selector: Mapping[str, Any], holder: str, ttl_s: float, now: datetime
    ) -> Lease | None:
        with self._lock:
            candidates = [
                (rid, r)
                for rid, r in self._resources.get(pool, {}).items()
                if r["enabled"]
                and is_free(r["lease"], now)
                and all(r.get(k) == v for k, v in selector.items())
            ]
            if not candidates:
                return None
            # Least recently leased first; never-leased before all others.
            rid, resource = min(
                candidates,
                key=lambda c: (c[1]["last_leased_at"] is not None, c[1]["last_leased_at"] or now),
            )
            lease = Lease(new_lease_id(pool), pool, rid, holder, expiry(now, ttl_s))
            resource["lease"] = {
                "id": lease.lease_id,
                "holder": holder,
                "expires_at": lease.expires_at,
            }
            resource["last_leased_at"] = now
            return lease

    def _find(self, lease_id: str) -> dict[str, Any] | None:
        for resource in self._resources.get(pool_of(lease_id), {}).values():
            if resource["lease"] and resource["lease"]["id"] == lease_id:
                return resource
        return None

    def release(self, lease_id: str) -> bool:
        with self._lock:
            resource = self._find(lease_id)
            if resource is None:
                return False
            resource["lease"] = None
            return True

    def renew(self, lease_id: str, ttl_s: float, now: datetime) -> bool:
        with self._lock:
            resource = self._find(lease_id)
            if resource is None or is_free(resource["lease"], now):
                return False
            resource["lease"]["expires_at"] = expiry(now, ttl_s)
            return True

    def secret(self, lease_id: str, now: datetime) -> str | None:
        with self._lock:
            resource = self._find(lease_id)
            if resource is None or is_free(resource["lease"], now):
                return None
            return resource.get("secret")

    def held(self, pool: str, now: datetime) -> int:
        with self._lock:
            return sum(
                1 for r in self._resources.get(pool, {}).values() if not is_free(r["lease"], now)
            )

    def expire(self, now: datetime) -> int:
        with self._lock:
            cleared = 0
            for resources in self._resources.values():
                for r in resources.values():
                    if r["lease"] is not None and is_free(r["lease"], now):
                        r["lease"] = None
                        cleared += 1
            return cleared
