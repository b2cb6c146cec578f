"""Pure rules for a domain's proxy tier: escalate after blocks, probe back down later.

Proxies carry a `tier` (0 the cheapest: datacenter, then residential, then mobile, as an
operator numbers them). Each domain (a media: one social network is one domain) starts on its
group's cheapest tier. After `escalate_after` blocks in a row on its tier it moves to the next
costlier tier, and after `probe_after_s` one batch tries the cheaper tier again (a probe, as
Crawlee's ProxyConfiguration does with its tiers): an answer there moves the domain down; a
block doubles the wait before the next probe, up to `probe_cap_s`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any


@dataclass(frozen=True)
class TierPolicy:
    escalate_after: int = 3
    probe_after_s: float = 600.0
    probe_cap_s: float = 6 * 3600.0

    def __post_init__(self) -> None:
        if self.escalate_after < 1:
            raise ValueError(f"escalate_after must be >= 1, got {self.escalate_after}")
        if not 0 < self.probe_after_s <= self.probe_cap_s:
            raise ValueError("need 0 < probe_after_s <= probe_cap_s")


@dataclass(frozen=True)
class TierState:
    """A domain's tier: where it is, its blocks in a row there, and when to probe lower."""

    tier: int = 0
    blocks: int = 0
    probe_at: datetime | None = None
    probe_every_s: float = 0.0

    @classmethod
    def of(cls, doc: Mapping[str, Any] | None) -> TierState:
        if not doc:
            return cls()
        return cls(
            int(doc.get("tier") or 0),
            int(doc.get("blocks") or 0),
            doc.get("probe_at"),
            float(doc.get("probe_every_s") or 0.0),
        )

    def fields(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "blocks": self.blocks,
            "probe_at": self.probe_at,
            "probe_every_s": self.probe_every_s,
        }


def _current(state: TierState, tiers: Sequence[int]) -> int:
    """The domain's tier among those that exist: its own, else the next costlier, else the
    costliest (an operator may have removed a tier's proxies)."""
    existing = sorted(set(tiers))
    if not existing:
        return state.tier
    return next((t for t in existing if t >= state.tier), existing[-1])


def _lower(tier: int, tiers: Sequence[int]) -> int | None:
    return max((t for t in set(tiers) if t < tier), default=None)


def _higher(tier: int, tiers: Sequence[int]) -> int | None:
    return min((t for t in set(tiers) if t > tier), default=None)


def tier_to_try(state: TierState, tiers: Sequence[int], now: datetime) -> tuple[int, bool]:
    """(tier, is_probe): the domain's tier, or the next cheaper one when a probe is due."""
    current = _current(state, tiers)
    lower = _lower(current, tiers)
    if lower is not None and state.probe_at is not None and state.probe_at <= now:
        return lower, True
    return current, False


def probe_taken(state: TierState, now: datetime, policy: TierPolicy) -> TierState:
    """One batch probes; the next probe is not due before another interval has passed."""
    every = state.probe_every_s or policy.probe_after_s
    return replace(state, probe_at=now + timedelta(seconds=every), probe_every_s=every)


def after_block(
    state: TierState, used: int, tiers: Sequence[int], now: datetime, policy: TierPolicy
) -> TierState:
    current = _current(state, tiers)
    if used < current:
        # A failed probe: stay up, and wait twice as long before the next one.
        every = min(policy.probe_cap_s, 2 * (state.probe_every_s or policy.probe_after_s))
        return replace(state, probe_at=now + timedelta(seconds=every), probe_every_s=every)
    if used > current:
        return state  # a lease taken before the domain moved down: says nothing of this tier
    blocks = state.blocks + 1
    higher = _higher(current, tiers)
    if blocks < policy.escalate_after or higher is None:
        return replace(state, tier=current, blocks=blocks)
    every = policy.probe_after_s
    return TierState(higher, 0, now + timedelta(seconds=every), every)


def after_answer(
    state: TierState, used: int, tiers: Sequence[int], now: datetime, policy: TierPolicy
) -> TierState:
    current = _current(state, tiers)
    if used < current:
        # A probe answered: the cheaper tier works again.
        lower = _lower(used, tiers)
        every = policy.probe_after_s
        return TierState(used, 0, None if lower is None else now + timedelta(seconds=every), every)
    if used == current and state.blocks:
        return replace(state, tier=current, blocks=0)
    return state
