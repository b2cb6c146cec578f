"""How long what a run leaves behind is kept, and MongoDB's TTL rule (pure: `now` is passed in).

Documents that may be forgotten carry a date field (`expire_at`, `expires_at` for idempotency
keys) set when they become expirable: a discovered page when its run ends, a history row when
its execution ended, an event when it is stored (or published), a webhook delivery when it
was delivered. A TTL index with `expireAfterSeconds: 0` on that field removes a document once
the date has passed: MongoDB's own TTL monitor on a server, `store/embedded/ttl.py` on the
embedded store, which applies `ttl_expired` below, the rule MongoDB documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

# The field every expirable document of ours carries (idempotency keys keep `expires_at`).
EXPIRE_AT = "expire_at"
# MongoDB accepts expireAfterSeconds from 0 to 2^31 - 1.
MAX_EXPIRE_AFTER_S = 2**31 - 1


@dataclass(frozen=True)
class Retention:
    """Seconds each kind of document is kept once it became expirable."""

    discovered_s: float = 7 * 86400.0
    history_s: float = 30 * 86400.0
    activity_s: float = 30 * 86400.0
    deliveries_s: float = 7 * 86400.0
    idempotency_s: float = 86400.0

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not (isinstance(value, int | float) and 0 < value < float("inf")):
                raise ValueError(f"retention {name} must be a positive number, got {value!r}")

    def discovered_until(self, run_ended_at: datetime) -> datetime:
        return run_ended_at + timedelta(seconds=self.discovered_s)

    def history_until(self, execution_ended_at: datetime) -> datetime:
        return execution_ended_at + timedelta(seconds=self.history_s)

    def activity_until(self, at: datetime) -> datetime:
        return at + timedelta(seconds=self.activity_s)

    def deliveries_until(self, delivered_at: datetime) -> datetime:
        return delivered_at + timedelta(seconds=self.deliveries_s)

    def idempotency_until(self, at: datetime) -> datetime:
        return at + timedelta(seconds=self.idempotency_s)


# The defaults, for a store built without settings.
DEFAULT_RETENTION = Retention()


def _as_utc(value: datetime) -> datetime:
    # BSON dates are UTC; a store that hands them back naive means UTC too.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def ttl_expired(value: Any, now: datetime, expire_after_s: int) -> bool:
    """MongoDB's TTL rule: a document whose indexed field is a date (or an array holding
    dates: its earliest) at least `expire_after_s` seconds before `now` is removed. A missing
    field, or one that holds no date, never expires."""
    if isinstance(value, list):
        dates = [v for v in value if isinstance(v, datetime)]
        if not dates:
            return False
        value = min(dates, key=_as_utc)
    if not isinstance(value, datetime):
        return False
    return _as_utc(value) + timedelta(seconds=expire_after_s) <= _as_utc(now)


def check_ttl_index(keys: Sequence[tuple[str, Any]], expire_after: Any) -> str:
    """The field a TTL index expires by; ValueError for options MongoDB refuses (a compound
    key, `_id`, a number of seconds that is not an integer in 0 .. 2^31 - 1)."""
    if isinstance(expire_after, bool) or not isinstance(expire_after, int | float):
        raise ValueError(f"expireAfterSeconds must be a number, got {expire_after!r}")
    if expire_after != int(expire_after) or not 0 <= expire_after <= MAX_EXPIRE_AFTER_S:
        raise ValueError(
            f"expireAfterSeconds must be an integer from 0 to {MAX_EXPIRE_AFTER_S}, "
            f"got {expire_after!r}"
        )
    if len(keys) != 1:
        raise ValueError("a TTL index has exactly one field (compound keys do not expire)")
    field = keys[0][0]
    if field == "_id":
        raise ValueError("a TTL index cannot be on _id")
    return field
