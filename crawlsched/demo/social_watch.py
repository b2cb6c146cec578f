"""What the demo social network remembers of who asks, how often and from where, to answer as
real networks do: too many requests in a window are refused for a while, and an account that
moves between addresses, or an address that many accounts share, looks like a bot farm and
gets the account banned. Pure: the time is an argument, and the caller holds the lock."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable


class SlidingWindow:
    """At most `uses` per key within any `window_s` seconds."""

    def __init__(self, uses: int, window_s: float) -> None:
        self.uses, self.window_s = uses, window_s
        self._recent: dict[Hashable, deque[float]] = {}

    def take(self, key: Hashable, now: float) -> int:
        """0 when one more use is allowed (and counts it); else the whole seconds to wait
        before the oldest use in the window leaves it (at least 1)."""
        recent = self._recent.setdefault(key, deque())
        while recent and now - recent[0] > self.window_s:
            recent.popleft()
        if len(recent) >= self.uses:
            return max(1, int(self.window_s - (now - recent[0])) + 1)
        recent.append(now)
        return 0


class AddressWatch:
    """The addresses each account was seen from, and the accounts each address carried, in
    the last `window_s` seconds; `see` says when a sighting breaks a rule:
    - `ban_moving`: the account was seen from another address too;
    - `max_accounts_per_address`: the account is one more than that at this address (the
      ones already there are left alone)."""

    def __init__(
        self, window_s: float, ban_moving: bool, max_accounts_per_address: int | None
    ) -> None:
        if window_s <= 0:
            raise ValueError(f"address_window_s must be positive, got {window_s}")
        if max_accounts_per_address is not None and max_accounts_per_address < 1:
            raise ValueError(
                f"max_accounts_per_address must be at least 1, got {max_accounts_per_address}"
            )
        self.window_s = window_s
        self.ban_moving = ban_moving
        self.max_accounts_per_address = max_accounts_per_address
        self._addresses_of: dict[str, dict[str, float]] = {}  # account -> address -> last seen
        self._accounts_at: dict[str, dict[str, float]] = {}  # address -> account -> last seen

    def see(self, account: str, address: str, now: float) -> str | None:
        """Note that `account` made a request from `address`; the reason to ban it, if this
        sighting breaks a rule. The caller keeps the ban: an account over an address's limit is
        reported once, when it arrives."""
        addresses = self._recent(self._addresses_of, account, now)
        accounts = self._recent(self._accounts_at, address, now)
        arrives = account not in accounts
        addresses[address] = accounts[account] = now
        window = f"within {self.window_s:g} s"
        if self.ban_moving and len(addresses) > 1:
            return f"account seen from {', '.join(sorted(addresses))} {window}"
        limit = self.max_accounts_per_address
        if limit is not None and arrives and len(accounts) > limit:
            return f"{len(accounts)} accounts seen from {address} {window} (at most {limit})"
        return None

    def _recent(self, table: dict[str, dict[str, float]], key: str, now: float):
        """table[key] without what was last seen before the window."""
        kept = {k: t for k, t in table.get(key, {}).items() if now - t <= self.window_s}
        table[key] = kept
        return kept
