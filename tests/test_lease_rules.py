"""The pure lease rules (`resources/rules.py`) against hand-written expectations.

Every expected value below is written out by hand from the rule as documented — never computed
with `rules.refusal`, `rules.load_key` or any other function under test — so a rule that is off
by one (a lease that counts one second too long, a full pool that takes one more, a cooldown
that ends early) disagrees with a line of a table. Resources are plain dicts, shaped like the
documents the store keeps; times are offsets in seconds from a fixed `NOW`.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.resources import rules
from crawlsched.resources.rules import ACCOUNT_POOL, SELENIUM_POOL, AccountLimits
from tests.support.factories import NOW

DAY = 86400


def at(seconds: float):
    return NOW + timedelta(seconds=seconds)


def lease(lease_id: str, expires_s: float) -> dict:
    return {"id": lease_id, "holder": f"d-{lease_id}", "expires_at": at(expires_s)}


def account(**fields) -> dict:
    """An active account, one lease at most, no cooldown, no rate window, holding nothing."""
    return {"status": "active", "max_concurrent": 1, "leases": [], **fields}


def node(**fields) -> dict:
    """An enabled node, probed up, not draining, one slot, holding nothing."""
    return {"enabled": True, "draining": False, "health": "up", "capacity": 1, "leases": [],
            **fields}  # fmt: skip


# -- lease ids and expiry ---------------------------------------------------------------------


@pytest.mark.parametrize("pool", [ACCOUNT_POOL, SELENIUM_POOL])
def test_lease_id_names_its_pool_and_is_unique(pool):
    # The prefix tells a worker which collection holds the lease; the rest never repeats.
    ids = {rules.new_lease_id(pool) for _ in range(50)}
    assert len(ids) == 50
    for lease_id in ids:
        prefix, dot, token = lease_id.partition(".")
        assert (prefix, dot) == (pool, ".")
        assert len(token) == 32 and int(token, 16) >= 0
        assert rules.pool_of(lease_id) == pool


def test_lease_id_of_an_unknown_pool_is_refused():
    with pytest.raises(
        ValueError, match=r"unknown pool 'vpn'; known: \('account', 'selenium', 'proxy'\)"
    ):
        rules.new_lease_id("vpn")


@pytest.mark.parametrize(
    "lease_id", ["", "account", "account.", ".abc", "vpn.abc", "selenium-abc", "Account.abc"]
)
def test_pool_of_refuses_what_is_not_a_lease_id(lease_id):
    with pytest.raises(ValueError, match=rf"not a lease id: {lease_id!r}"):
        rules.pool_of(lease_id)


@pytest.mark.parametrize(
    ("lease_id", "pool"),
    [("account.a", ACCOUNT_POOL), ("selenium.0f", SELENIUM_POOL), ("account.x.y", ACCOUNT_POOL)],
)
def test_pool_of_reads_the_prefix_before_the_first_dot(lease_id, pool):
    assert rules.pool_of(lease_id) == pool


@pytest.mark.parametrize(("ttl_s", "until"), [(30, at(30)), (0.5, at(0.5)), (1e-3, at(1e-3))])
def test_expiry_is_now_plus_the_ttl(ttl_s, until):
    assert rules.expiry(NOW, ttl_s) == until


@pytest.mark.parametrize("ttl_s", [0, -1, -0.001, float("nan")])
def test_expiry_refuses_a_ttl_that_is_not_positive(ttl_s):
    with pytest.raises(ValueError, match=r"lease ttl must be > 0 seconds, got"):
        rules.expiry(NOW, ttl_s)


# -- which leases count -----------------------------------------------------------------------


def test_a_lease_counts_until_its_expiry_and_not_at_it():
    resource = {"leases": [lease("a", 10), lease("b", 20), lease("c", 0)]}
    assert [x["id"] for x in rules.live_leases(resource, at(-1))] == ["a", "b", "c"]
    assert [x["id"] for x in rules.live_leases(resource, at(0))] == ["a", "b"]
    assert [x["id"] for x in rules.live_leases(resource, at(9.999))] == ["a", "b"]
    assert [x["id"] for x in rules.live_leases(resource, at(10))] == ["b"]
    assert rules.live_leases(resource, at(20)) == []


@pytest.mark.parametrize("resource", [{}, {"leases": None}, {"leases": []}])
def test_a_resource_without_leases_holds_none(resource):
    assert rules.live_leases(resource, NOW) == []
    assert rules.held_by([resource], NOW) == 0


def test_held_by_counts_live_leases_across_resources():
    resources = [
        {"leases": [lease("a", 10), lease("b", 5)]},
        {"leases": [lease("c", 10)]},
        {"leases": []},
        {},
    ]
    assert rules.held_by(resources, NOW) == 3
    assert rules.held_by(resources, at(5)) == 2
    assert rules.held_by(resources, at(10)) == 0
    assert rules.held_by([], NOW) == 0


# -- capacity and states ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pool", "resource", "capacity"),
    [
        (ACCOUNT_POOL, {"max_concurrent": 3}, 3),
        (ACCOUNT_POOL, {"max_concurrent": None}, 1),  # an account takes one lease by default
        (ACCOUNT_POOL, {}, 1),
        (ACCOUNT_POOL, {"max_concurrent": 2, "capacity": 9}, 2),  # not a node's field
        (SELENIUM_POOL, {"capacity": 4}, 4),
        (SELENIUM_POOL, {"capacity": None}, 0),  # a node nobody sized takes nothing
        (SELENIUM_POOL, {}, 0),
        (SELENIUM_POOL, {"capacity": 2, "max_concurrent": 9}, 2),
    ],
)
def test_capacity_of(pool, resource, capacity):
    assert rules.capacity_of(pool, resource) == capacity


@pytest.mark.parametrize(
    ("fields", "until"),
    [
        ({}, None),
        ({"cooling_until": at(30)}, at(30)),  # the site said "not before T"
        ({"last_released_at": at(0), "cooldown_s": 5}, at(5)),  # rest after the last use
        ({"last_released_at": at(0), "cooldown_s": 0}, None),  # no rest: not cooling at all
        ({"last_released_at": at(0), "cooldown_s": None}, None),
        ({"last_released_at": at(0)}, None),
        ({"cooldown_s": 5}, None),  # never released: nothing to rest from
        ({"last_released_at": at(0), "cooldown_s": 2.5}, at(2.5)),
        ({"last_released_at": at(0), "cooldown_s": 1}, at(1)),  # a rest of a second or less
        ({"last_released_at": at(0), "cooldown_s": 0.5}, at(0.5)),
        ({"cooling_until": at(30), "last_released_at": at(0), "cooldown_s": 5}, at(30)),
        ({"cooling_until": at(3), "last_released_at": at(0), "cooldown_s": 5}, at(5)),
        ({"cooling_until": None, "last_released_at": at(10), "cooldown_s": 5}, at(15)),
    ],
)
def test_cooling_until_is_the_later_of_the_sites_date_and_the_rest(fields, until):
    assert rules.cooling_until(account(**fields)) == until


@pytest.mark.parametrize(
    ("fields", "now", "state"),
    [
        ({}, 0, "active"),
        ({"status": None}, 0, "active"),  # no status yet: active
        ({"status": "banned"}, 0, "banned"),
        ({"status": "disabled"}, 0, "disabled"),
        # The operator's status wins over a cooldown.
        ({"status": "banned", "cooling_until": at(10)}, 0, "banned"),
        ({"cooling_until": at(10)}, 9.999, "cooling"),
        ({"cooling_until": at(10)}, 10, "active"),  # cooled down at the date itself
        ({"cooling_until": at(10)}, 11, "active"),
        ({"last_released_at": at(0), "cooldown_s": 5}, 4.999, "cooling"),
        ({"last_released_at": at(0), "cooldown_s": 5}, 5, "active"),
    ],
)
def test_account_state(fields, now, state):
    assert rules.account_state(account(**fields), at(now)) == state


@pytest.mark.parametrize(
    ("fields", "state"),
    [
        ({}, "up"),
        ({"health": "down"}, "down"),
        ({"health": None}, "unknown"),  # never probed
        ({"health": "unknown"}, "unknown"),
        ({"draining": True}, "draining"),
        ({"draining": None}, "up"),
        ({"enabled": False}, "disabled"),
        ({"enabled": False, "draining": True, "health": "down"}, "disabled"),  # disabled first
        ({"draining": True, "health": "down"}, "draining"),  # then draining, then health
    ],
)
def test_node_state(fields, state):
    assert rules.node_state(node(**fields)) == state


def test_node_state_of_a_bare_document_is_unknown_and_enabled():
    # A node document written before `enabled` and `health` existed is enabled, not yet probed.
    assert rules.node_state({}) == "unknown"
    assert rules.node_state({"health": "up"}) == "up"


# -- refusal: the table ------------------------------------------------------------------------

# (what, resource, now, why not or None). One line per rule and per side of its boundary.
ACCOUNT_CASES = [
    ("free", account(), 0, None),
    ("full", account(leases=[lease("a", 30)]), 0, "busy"),
    ("its lease expired", account(leases=[lease("a", 30)]), 30, None),
    ("a second before", account(leases=[lease("a", 30)]), 29, "busy"),
    ("one of two held", account(max_concurrent=2, leases=[lease("a", 30)]), 0, None),
    ("two of two", account(max_concurrent=2, leases=[lease("a", 30), lease("b", 9)]), 0, "busy"),
    ("two of three", account(max_concurrent=3, leases=[lease("a", 9), lease("b", 9)]), 0, None),
    ("no max given", account(max_concurrent=None), 0, None),
    ("no max, one held", account(max_concurrent=None, leases=[lease("a", 9)]), 0, "busy"),
    ("banned", account(status="banned"), 0, "banned"),
    ("disabled", account(status="disabled"), 0, "disabled"),
    ("site cooldown", account(cooling_until=at(10)), 9, "cooling"),
    ("site cooldown over", account(cooling_until=at(10)), 10, None),
    ("resting", account(last_released_at=at(0), cooldown_s=5), 4, "cooling"),
    ("rested", account(last_released_at=at(0), cooldown_s=5), 5, None),
    ("banned and full", account(status="banned", leases=[lease("a", 9)]), 0, "banned"),
]
WINDOW = {"max_concurrent": 5, "rate_uses": 2, "rate_window_s": 20}
RATE_CASES = [
    ("window has room", account(**WINDOW, window_ends_at=at(20), window_uses=1), 0, None),
    ("window full", account(**WINDOW, window_ends_at=at(20), window_uses=2), 0, "rate window full"),
    ("window over-full", account(**WINDOW, window_ends_at=at(20), window_uses=3), 0,
     "rate window full"),
    ("window full, ends", account(**WINDOW, window_ends_at=at(20), window_uses=2), 20, None),
    ("full, just before", account(**WINDOW, window_ends_at=at(20), window_uses=2), 19.9,
     "rate window full"),
    ("no window yet", account(**WINDOW), 0, None),
    ("window, no uses", account(**WINDOW, window_ends_at=at(20), window_uses=None), 0, None),
    ("limit of one, no uses", account(**{**WINDOW, "rate_uses": 1}, window_ends_at=at(9)), 0,
     None),
    ("limit of one", account(**{**WINDOW, "rate_uses": 1}, window_ends_at=at(9), window_uses=1),
     0, "rate window full"),
    ("no limit", account(max_concurrent=5, rate_uses=None, window_ends_at=at(20), window_uses=9),
     0, None),
    ("cooling first", account(**WINDOW, window_ends_at=at(20), window_uses=2,
     cooling_until=at(5)), 0, "cooling"),
    ("window ok, full", account(**{**WINDOW, "max_concurrent": 1}, window_ends_at=at(20),
     window_uses=1, leases=[lease("a", 9)]), 0, "busy"),
]  # fmt: skip
NODE_CASES = [
    ("free", node(), 0, None),
    ("full", node(leases=[lease("a", 30)]), 0, "busy"),
    ("its lease expired", node(leases=[lease("a", 30)]), 30, None),
    ("one of two", node(capacity=2, leases=[lease("a", 30)]), 0, None),
    ("two of two", node(capacity=2, leases=[lease("a", 30), lease("b", 1)]), 0, "busy"),
    ("one of two expired", node(capacity=2, leases=[lease("a", 30), lease("b", 1)]), 1, None),
    ("never sized", node(capacity=None), 0, "busy"),
    ("down", node(health="down"), 0, "down"),
    ("never probed", node(health=None), 0, "unknown"),
    ("draining", node(draining=True), 0, "draining"),
    ("disabled", node(enabled=False), 0, "disabled"),
    ("down and full", node(health="down", leases=[lease("a", 9)]), 0, "down"),
]


@pytest.mark.parametrize(
    ("resource", "now", "why"),
    [pytest.param(r, t, why, id=what) for what, r, t, why in ACCOUNT_CASES + RATE_CASES],
)
def test_refusal_of_an_account(resource, now, why):
    assert rules.refusal(ACCOUNT_POOL, resource, at(now)) == why


@pytest.mark.parametrize(
    ("resource", "now", "why"), [pytest.param(r, t, why, id=what) for what, r, t, why in NODE_CASES]
)
def test_refusal_of_a_node(resource, now, why):
    assert rules.refusal(SELENIUM_POOL, resource, at(now)) == why


def test_a_node_is_not_judged_by_account_fields_nor_an_account_by_node_fields():
    # Each pool reads its own fields: a node has no status or rate window, an account no health.
    assert rules.refusal(SELENIUM_POOL, node(status="banned", rate_uses=1, window_uses=5,
                                             window_ends_at=at(9)), NOW) is None  # fmt: skip
    assert rules.refusal(ACCOUNT_POOL, account(health="down", draining=True), NOW) is None


@settings(max_examples=150, derandomize=True)
@given(
    capacity=st.integers(1, 4),
    expiries=st.lists(st.integers(-3, 3), max_size=6),
    now=st.integers(-3, 3),
)
def test_a_free_active_resource_takes_one_more_while_live_leases_are_below_capacity(
    capacity, expiries, now
):
    # Counted by hand: a lease is live while its expiry is later than now.
    live = sum(1 for e in expiries if e > now)
    leases = [lease(f"l{i}", e) for i, e in enumerate(expiries)]
    expected = None if live < capacity else "busy"
    assert rules.refusal(ACCOUNT_POOL, account(max_concurrent=capacity, leases=leases), at(now)) \
        == expected  # fmt: skip
    assert rules.refusal(SELENIUM_POOL, node(capacity=capacity, leases=leases), at(now)) == expected


# -- which resource goes first -----------------------------------------------------------------


def urls(nodes) -> list[str]:
    return [n["url"] for n in nodes]


def test_choose_takes_only_free_resources_least_loaded_first():
    nodes = [
        node(url="half", capacity=2, leases=[lease("a", 9)], last_leased_at=at(-9)),
        node(url="full", capacity=1, leases=[lease("b", 9)], last_leased_at=at(-20)),
        node(url="idle", capacity=4, last_leased_at=at(-1)),
        node(url="down", capacity=4, health="down"),
        node(url="quarter", capacity=4, leases=[lease("c", 9)], last_leased_at=at(-9)),
    ]
    assert urls(rules.choose(SELENIUM_POOL, nodes, NOW)) == ["idle", "quarter", "half"]
    # Once every lease expired, all four are idle: the one leased longest ago goes first.
    assert urls(rules.choose(SELENIUM_POOL, nodes, at(9))) == ["full", "half", "quarter", "idle"]


def test_choose_prefers_never_leased_then_least_recently_leased():
    accounts = [
        account(username="recent", last_leased_at=at(-1)),
        account(username="older", last_leased_at=at(-50)),
        account(username="never", last_leased_at=None),
        account(username="oldest", last_leased_at=at(-100)),
        account(username="banned", status="banned", last_leased_at=None),
    ]
    chosen = rules.choose(ACCOUNT_POOL, accounts, NOW)
    assert [a["username"] for a in chosen] == ["never", "oldest", "older", "recent"]


def test_choose_compares_load_as_a_share_of_capacity():
    # 1 of 4 in use (25 %) goes before 1 of 2 (50 %) and 2 of 3 (67 %), whatever the counts.
    accounts = [
        account(username="two-of-three", max_concurrent=3, leases=[lease("a", 9), lease("b", 9)]),
        account(username="one-of-two", max_concurrent=2, leases=[lease("c", 9)]),
        account(username="one-of-four", max_concurrent=4, leases=[lease("d", 9)]),
    ]
    chosen = rules.choose(ACCOUNT_POOL, accounts, NOW)
    assert [a["username"] for a in chosen] == ["one-of-four", "one-of-two", "two-of-three"]


def test_choose_counts_only_live_leases_in_the_load():
    # "stale" holds two expired leases: it is idle, and it was leased longer ago.
    accounts = [
        account(username="busy", max_concurrent=2, leases=[lease("a", 9)], last_leased_at=at(-5)),
        account(username="stale", max_concurrent=2, leases=[lease("b", -1), lease("c", 0)],
                last_leased_at=at(-3)),
    ]  # fmt: skip
    chosen = rules.choose(ACCOUNT_POOL, accounts, NOW)
    assert [a["username"] for a in chosen] == ["stale", "busy"]


def test_choose_of_nothing_free_is_empty():
    assert rules.choose(SELENIUM_POOL, [node(health="down"), node(capacity=0)], NOW) == []
    assert rules.choose(SELENIUM_POOL, [], NOW) == []


def test_load_key_of_a_node_nobody_sized_does_not_divide_by_zero():
    # Such a node is refused anyway ("busy"), but a key is still computed by views and sorts.
    assert rules.load_key(SELENIUM_POOL, node(capacity=0, leases=[lease("a", 9)]), NOW) == (
        1.0,
        False,
        NOW,
    )
    assert rules.load_key(SELENIUM_POOL, node(capacity=3, last_leased_at=at(-4)), NOW) == (
        0.0,
        True,
        at(-4),
    )


# -- what a grant writes -----------------------------------------------------------------------


def test_grant_adds_the_lease_drops_expired_ones_and_stamps_the_time():
    resource = node(capacity=3, leases=[lease("old", 5), lease("live", 20)])
    new = lease("new", 35)
    fields = rules.grant_fields(SELENIUM_POOL, resource, new, at(5))
    assert fields == {"leases": [lease("live", 20), lease("new", 35)], "last_leased_at": at(5)}
    assert fields["leases"][-1] is not new  # a copy: the caller's dict is not stored


@pytest.mark.parametrize(
    ("fields", "now", "written"),
    [
        # No window yet: the grant opens one, counted as its first use.
        ({}, 0, {"window_ends_at": at(20), "window_uses": 1}),
        # An open window counts one more use; its end stays.
        ({"window_ends_at": at(20), "window_uses": 1}, 5, {"window_uses": 2}),
        ({"window_ends_at": at(20), "window_uses": None}, 5, {"window_uses": 1}),
        ({"window_ends_at": at(20), "window_uses": 1}, 19.9, {"window_uses": 2}),
        # A window that ended (at its end date exactly, or long ago) is replaced by a new one.
        ({"window_ends_at": at(20), "window_uses": 2}, 20, {"window_ends_at": at(40),
                                                            "window_uses": 1}),
        ({"window_ends_at": at(20), "window_uses": 2}, 100, {"window_ends_at": at(120),
                                                             "window_uses": 1}),
    ],
)  # fmt: skip
def test_grant_counts_the_rate_window(fields, now, written):
    # Equivalent mutant (grant_fields: `rate_window_s or 0` -> `or 1`): the fallback is never
    # read, since AccountLimits refuses rate_uses without a rate_window_s > 0 (see
    # test_account_limits_refuses) and accounts are only written through it.
    resource = account(**WINDOW, **fields)
    got = rules.grant_fields(ACCOUNT_POOL, resource, lease("n", now + 30), at(now))
    assert got == {"leases": [lease("n", now + 30)], "last_leased_at": at(now), **written}


def test_grant_without_a_rate_limit_writes_no_window():
    # Neither an account without a limit nor a node keeps a window, whatever stale fields say.
    stale = {"window_ends_at": at(20), "window_uses": 1, "rate_window_s": 20}
    for pool, resource in [
        (ACCOUNT_POOL, account(rate_uses=None, **stale)),
        (ACCOUNT_POOL, account(rate_uses=0, **stale)),
        (SELENIUM_POOL, node(rate_uses=2, **stale)),
    ]:
        assert set(rules.grant_fields(pool, resource, lease("n", 30), NOW)) == {
            "leases",
            "last_leased_at",
        }


def test_renew_pushes_back_only_that_lease_and_drops_expired_ones():
    resource = node(capacity=3, leases=[lease("a", 10), lease("b", 20), lease("gone", 5)])
    assert rules.renew_fields(resource, "a", 30, at(5)) == {
        "leases": [lease("a", 35), lease("b", 20)]
    }
    assert rules.renew_fields(resource, "b", 1, at(9)) == {
        "leases": [lease("a", 10), lease("b", 10)]
    }


@pytest.mark.parametrize(("lease_id", "now"), [("a", 10), ("a", 11), ("missing", 0), ("gone", 5)])
def test_renew_of_an_expired_or_unknown_lease_is_none(lease_id, now):
    # An expired lease is never revived: its slot may already be someone else's.
    resource = node(capacity=3, leases=[lease("a", 10), lease("gone", 5)])
    assert rules.renew_fields(resource, lease_id, 30, at(now)) is None


def test_renew_refuses_a_ttl_that_is_not_positive():
    with pytest.raises(ValueError, match="lease ttl must be > 0"):
        rules.renew_fields(node(leases=[lease("a", 10)]), "a", 0, NOW)


# -- the limits an operator sets ---------------------------------------------------------------


@pytest.mark.parametrize(
    "limits",
    [
        {},
        {"max_concurrent": 1},
        {"max_concurrent": 50, "cooldown_s": 0.0},
        {"cooldown_s": 7 * DAY},  # a week of rest is the most
        {"cooldown_s": 0.001},
        {"rate_uses": 1, "rate_window_s": 0.001},
        {"rate_uses": 100, "rate_window_s": 7 * DAY},
    ],
)
def test_account_limits_accepts(limits):
    assert AccountLimits(**limits) == AccountLimits(**limits)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"max_concurrent": 0}, "max_concurrent must be >= 1, got 0"),
        ({"max_concurrent": -1}, "max_concurrent must be >= 1, got -1"),
        ({"cooldown_s": -0.001}, "cooldown_s must be between 0 and 7 days, got -0.001"),
        ({"cooldown_s": 7 * DAY + 1}, "cooldown_s must be between 0 and 7 days, got 604801"),
        ({"rate_uses": 2}, "rate_uses and rate_window_s go together: give both or neither"),
        ({"rate_window_s": 20}, "rate_uses and rate_window_s go together: give both or neither"),
        ({"rate_uses": 0, "rate_window_s": 20}, "rate_uses must be >= 1, got 0"),
        ({"rate_uses": 1, "rate_window_s": 0}, "rate_window_s must be in (0, 7 days], got 0"),
        ({"rate_uses": 1, "rate_window_s": -5}, "rate_window_s must be in (0, 7 days], got -5"),
        ({"rate_uses": 1, "rate_window_s": 7 * DAY + 1},
         "rate_window_s must be in (0, 7 days], got 604801"),
    ],
)  # fmt: skip
def test_account_limits_refuses(limits, message):
    # The operator reads this line as it stands: the whole message is the contract.
    with pytest.raises(ValueError) as refused:
        AccountLimits(**limits)
    assert str(refused.value) == message


def test_account_limits_defaults_are_one_lease_no_rest_no_window():
    assert AccountLimits() == AccountLimits(1, 0.0, None, None)
