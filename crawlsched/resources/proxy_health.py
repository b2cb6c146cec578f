"""Pure rules for a proxy's health: when it may carry traffic, and how long it rests after a
failure.

A proxy that refuses a connection, times out, or whose answers show a block (a status code or
a body marker its media declares) has failed. It then cools down for a backoff that doubles
with each failure in a row (`base_s`, twice that, … up to `cap_s`, as scrapy-rotating-proxies
does with 300 s and 1 h), and is checked again by the first batch that leases it after the
cooldown: an answer through it resets the count, another failure doubles the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

ACTIVE, COOLING, DISABLED = "active", "cooling", "disabled"
SCHEMES = ("http", "https", "socks5")


@dataclass(frozen=True)
class Backoff:
    """How long a failed proxy rests: `base_s` after one failure, doubling, at most `cap_s`."""

    base_s: float = 300.0
    cap_s: float = 3600.0

    def __post_init__(self) -> None:
        if not 0 < self.base_s <= self.cap_s:
            raise ValueError(f"need 0 < base_s <= cap_s, got {self.base_s} and {self.cap_s}")

    def rest_s(self, failures: int) -> float:
        """The rest after `failures` failures in a row (>= 1)."""
        if failures < 1:
            return 0.0
        # 2 ** 60 is past any cap: no float overflow for a proxy failing for ever.
        return min(self.cap_s, self.base_s * 2 ** min(failures - 1, 60))


def proxy_state(proxy: Mapping[str, Any], now: datetime) -> str:
    if not proxy.get("enabled", True):
        return DISABLED
    until = proxy.get("cooling_until")
    return COOLING if until is not None and until > now else ACTIVE


def failed_fields(
    proxy: Mapping[str, Any], reason: str, now: datetime, backoff: Backoff
) -> dict[str, Any]:
    """What a failure writes: one more in a row, and a rest from now that doubles with each."""
    failures = int(proxy.get("failures") or 0) + 1
    return {
        "failures": failures,
        "cooling_until": now + timedelta(seconds=backoff.rest_s(failures)),
        "status_reason": reason[:300],
        "failed_at": now,
    }


def answered_fields(now: datetime) -> dict[str, Any]:
    """What an answer through the proxy writes: it works, the failures in a row start over."""
    return {"failures": 0, "ok_at": now}
