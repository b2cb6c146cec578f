"""The interface every lease backend implements (see backends/)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

from crawlsched.resources.rules import Lease


class LeaseBackend(Protocol):
    def try_acquire(
        self, pool: str, selector: Mapping[str, Any], holder: str, ttl_s: float, now: datetime
    ) -> Lease | None:
        """Atomically lease one free, enabled resource of `pool` matching `selector`.

        Prefer the least recently leased one, so that accounts wear evenly.
        """

    def release(self, lease_id: str) -> bool:
        """Free the resource if this lease still holds it; False if it had already gone."""

    def renew(self, lease_id: str, ttl_s: float, now: datetime) -> bool:
        """Push the expiry back if this lease still holds the resource and has not expired."""

    def secret(self, lease_id: str, now: datetime) -> str | None:
        """The credential behind a live account lease, or None."""

    def held(self, pool: str, now: datetime) -> int:
        """How many resources of `pool` are held by a live lease."""

    def expire(self, now: datetime) -> int:
        """Clear leases that ran out (they are already free; this only tidies what is shown)."""
