"""How many connections each client address holds: a cap per address. Pure.

Used from the server's event loop only (every protocol callback runs on it), so it needs no
lock. An address that holds nothing is forgotten, so the table is as large as the set of
clients connected now, whatever came before.
"""

from __future__ import annotations


class ClientSlots:
    """`take(address)` a slot when the address holds fewer than `cap` (0: no cap), and
    `give_back(address)` it when its connection ends."""

    def __init__(self, cap: int) -> None:
        if cap < 0:
            raise ValueError(f"api_max_connections_per_client: 0 or more, got {cap}")
        self.cap = cap
        self._held: dict[str, int] = {}

    def take(self, address: str) -> bool:
        held = self._held.get(address, 0)
        if self.cap and held >= self.cap:
            return False
        self._held[address] = held + 1
        return True

    def give_back(self, address: str) -> None:
        held = self._held.get(address, 0) - 1
        if held > 0:
            self._held[address] = held
        else:
            self._held.pop(address, None)

    def held(self, address: str) -> int:
        return self._held.get(address, 0)

    def __len__(self) -> int:
        """Addresses holding at least one connection."""
        return len(self._held)
