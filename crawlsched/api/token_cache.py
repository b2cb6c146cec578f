"""Verified tokens, remembered for a few seconds so that a request's token check is neither a
store read nor a trip through the thread pool.

An entry is good while both hold:
- it is younger than `ttl_s` (`CRAWLSCHED_API_TOKEN_CACHE_S`, 2 s by default, 0: no cache):
  a token revoked by another process (say `crawlsched tokens revoke` on the same MongoDB) is
  refused at the latest that long after;
- no token was revoked in this process since it was filled (`MongoTokenStore.revocations`,
  read before the store was): a revoke through this server, or anything else in its process,
  is refused on the next request.

Only verified tokens are remembered (an unknown one is read from the store every time, so a
token made a moment ago works at once, and junk cannot fill the cache), under the token's
SHA-256, at most `max_entries` of them (the oldest go first).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from crawlsched.store.tokens import digest


class TokenCache:
    def __init__(self, ttl_s: float, max_entries: int = 1024) -> None:
        if ttl_s < 0:
            raise ValueError(f"api_token_cache_s must be 0 or more, got {ttl_s}")
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[dict[str, Any], float, int]] = OrderedDict()

    def get(self, token: str, revocations: int, now: float) -> dict[str, Any] | None:
        """The row remembered for `token` (a copy), or None: never seen, too old, or a token
        was revoked since (`revocations` moved). `now`: a monotonic clock, in seconds."""
        if not self.ttl_s:
            return None
        key = digest(token)
        entry = self._entries.get(key)
        if entry is None:
            return None
        row, filled_at, filled_revocations = entry
        if filled_revocations != revocations or not 0 <= now - filled_at < self.ttl_s:
            self._entries.pop(key, None)
            return None
        return dict(row)

    def put(self, token: str, row: dict[str, Any], revocations: int, now: float) -> None:
        """Remember a verified token's row; `revocations` as read before the store was."""
        if not self.ttl_s:
            return
        key = digest(token)
        self._entries.pop(key, None)
        self._entries[key] = (dict(row), now, revocations)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
