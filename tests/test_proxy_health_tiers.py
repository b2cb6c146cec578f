"""A proxy's rest after failures, and a domain's tier: pure rules, with hypothesis properties."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.resources.proxy_health import (
    ACTIVE,
    COOLING,
    DISABLED,
    Backoff,
    answered_fields,
    failed_fields,
    proxy_state,
)
from crawlsched.resources.proxy_tiers import (
    TierPolicy,
    TierState,
    after_answer,
    after_block,
    probe_taken,
    tier_to_try,
)
from tests.support.factories import NOW

POLICY = TierPolicy(escalate_after=3, probe_after_s=600, probe_cap_s=3600)
TIERS = [0, 1, 2]


def test_a_failed_proxy_rests_300_then_600_s_and_at_most_an_hour_and_an_answer_resets_it():
    backoff, proxy = Backoff(300, 3600), {"enabled": True}
    rests = []
    for _ in range(6):
        proxy = {**proxy, **failed_fields(proxy, "refused", NOW, backoff)}
        rests.append((proxy["cooling_until"] - NOW).total_seconds())
        assert proxy_state(proxy, NOW) == COOLING
        assert proxy_state(proxy, proxy["cooling_until"]) == ACTIVE  # checked again after
    assert rests == [300, 600, 1200, 2400, 3600, 3600]
    proxy = {**proxy, **answered_fields(NOW)}
    assert proxy["failures"] == 0
    assert proxy_state({**proxy, **failed_fields(proxy, "x", NOW, backoff)}, NOW) == COOLING
    assert proxy_state({"enabled": False}, NOW) == DISABLED


@given(st.integers(0, 10_000), st.floats(1, 1000), st.floats(1, 10))
def test_a_rest_never_shrinks_with_more_failures_and_never_passes_the_cap(failures, base, factor):
    backoff = Backoff(base, base * factor)
    assert 0 <= backoff.rest_s(failures) <= backoff.rest_s(failures + 1) <= backoff.cap_s


def test_backoff_refuses_a_cap_below_its_base():
    with pytest.raises(ValueError, match="base_s <= cap_s"):
        Backoff(600, 300)


def test_a_domain_escalates_after_three_blocks_and_probes_back_down():
    state = TierState()
    for _ in range(2):
        state = after_block(state, 0, TIERS, NOW, POLICY)
    assert tier_to_try(state, TIERS, NOW) == (0, False)
    state = after_block(state, 0, TIERS, NOW, POLICY)
    assert tier_to_try(state, TIERS, NOW) == (1, False)  # escalated, no probe yet
    later = NOW + timedelta(seconds=600)
    assert tier_to_try(state, TIERS, later) == (0, True)  # one batch probes the cheaper tier
    state = probe_taken(state, later, POLICY)
    assert tier_to_try(state, TIERS, later) == (1, False)  # the others stay up meanwhile
    # The probe is blocked: the next one waits twice as long
    state = after_block(state, 0, TIERS, later, POLICY)
    assert state.tier == 1 and state.probe_every_s == 1200
    assert tier_to_try(state, TIERS, later + timedelta(seconds=1199))[1] is False
    # The next probe answers: the domain is back down
    state = after_answer(state, 0, TIERS, later + timedelta(seconds=1200), POLICY)
    assert (state.tier, state.blocks, state.probe_at) == (0, 0, None)


@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 3), st.integers(0, 4000)), min_size=1, max_size=40
    ),
    st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True),
)
def test_a_domain_is_always_on_a_tier_that_exists_and_probes_wait_at_most_the_cap(steps, tiers):
    state, now = TierState(), NOW
    for blocked, offset, seconds in steps:
        now += timedelta(seconds=seconds)
        tier, probe = tier_to_try(state, tiers, now)
        assert tier in tiers
        if probe:
            assert tier < state.tier or tier < max(tiers)  # cheaper than where the domain is
            state = probe_taken(state, now, POLICY)
        used = sorted(tiers)[min(offset, len(tiers) - 1)] if offset else tier
        rule = after_block if blocked else after_answer
        state = rule(state, used, tiers, now, POLICY)
        assert 0 <= state.probe_every_s <= POLICY.probe_cap_s
        assert state.blocks < POLICY.escalate_after or state.tier == max(tiers)
