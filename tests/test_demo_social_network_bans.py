"""The demo social network acts on the address a request comes from, as real networks do to
crawlers: an account that moves between addresses, or one too many accounts on one address,
is banned (403 `account suspended`); a per-endpoint limit refuses one view while the others
still answer; a session expires. Two forward proxies with their own outgoing addresses
(127.0.0.2 and 127.0.0.3) stand for the accounts' proxies."""

from __future__ import annotations

import time
from collections import Counter

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.demo.forward_proxy import ForwardProxy
from crawlsched.demo.social import DemoSocialNetwork
from crawlsched.demo.social_watch import AddressWatch

ACCOUNTS = {"alice": "pw", "eve": "pw", "bob": "pw"}
A, B = "127.0.0.2", "127.0.0.3"


class _Clock:
    """The network's clock, moved by the test (no waiting on the wall clock)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def via():
    """`via[A]`, `via[B]`: an httpx client through the forward proxy with that address."""
    with (
        ForwardProxy(A) as proxy_a,
        ForwardProxy(B) as proxy_b,
        httpx.Client(proxy=proxy_a.url, timeout=10) as client_a,
        httpx.Client(proxy=proxy_b.url, timeout=10) as client_b,
    ):
        yield {A: client_a, B: client_b, "proxies": {A: proxy_a, B: proxy_b}}


def _login(client: httpx.Client, net: DemoSocialNetwork, user: str, password: str = "pw"):
    """The login's answer, and the session cookie it set (None when refused)."""
    response = client.post(f"{net.base_url}/login", data={"username": user, "password": password})
    return response, response.cookies.get("session")


def _get(client: httpx.Client, net: DemoSocialNetwork, path: str, session: str | None):
    headers = {"Cookie": f"session={session}"} if session else {}
    return client.get(f"{net.base_url}{path}", headers=headers)


def test_an_account_seen_from_a_second_address_is_banned(via):
    with DemoSocialNetwork(["ada"], ACCOUNTS, ban_moving_accounts=True) as net:
        response, session = _login(via[A], net, "alice")
        assert response.status_code == 303
        assert _get(via[A], net, "/u/ada/followers", session).status_code == 200
        # When the same session comes from the other proxy
        moved = _get(via[B], net, "/u/ada/followers", session)
        # Then the account is banned, from either address, and cannot log in again
        assert moved.status_code == 403 and "account suspended" in moved.text
        again = _get(via[A], net, "/u/ada/posts", session)
        assert again.status_code == 403 and "account suspended" in again.text
        relogin, _ = _login(via[A], net, "alice")
        assert relogin.status_code == 403 and "account suspended" in relogin.text
        # Another account, on its own address, is not touched
        _, eve = _login(via[B], net, "eve")
        assert _get(via[B], net, "/u/ada/followers", eve).status_code == 200
        banned, seen_from = dict(net.banned), net.seen_from
    assert list(banned) == ["alice"]
    assert A in banned["alice"] and B in banned["alice"]
    assert seen_from == {"alice": {A, B}, "eve": {B}}
    # The proxies' logs tell which account went through which proxy
    cookies = {r.cookie for r in via["proxies"][B].log if r.cookie}
    assert cookies == {f"session={session}", f"session={eve}"}


def test_an_account_may_move_when_the_rule_is_off(via):
    with DemoSocialNetwork(["ada"], ACCOUNTS) as net:
        _, session = _login(via[A], net, "alice")
        assert _get(via[A], net, "/u/ada/followers", session).status_code == 200
        assert _get(via[B], net, "/u/ada/followers", session).status_code == 200
        assert _login(via[B], net, "alice")[0].status_code == 303
    assert net.banned == {}
    assert net.address_of_requests == {"alice": Counter({A: 2, B: 2})}


def test_one_account_too_many_on_an_address_is_banned_within_the_window(via):
    clock = _Clock()
    with DemoSocialNetwork(
        ["ada"], ACCOUNTS, max_accounts_per_address=1, address_window_s=600, clock=clock
    ) as net:
        _, alice = _login(via[A], net, "alice")
        # A second account on the same address is the one banned
        refused, _ = _login(via[A], net, "eve")
        assert refused.status_code == 403 and "account suspended" in refused.text
        assert _get(via[A], net, "/u/ada/followers", alice).status_code == 200
        # On another address, another account is welcome
        assert _login(via[B], net, "bob")[0].status_code == 303
        # Once alice has not been seen from A for the whole window, bob may come from A too
        clock.now += 601
        _, bob = _login(via[A], net, "bob")
        assert _get(via[A], net, "/u/ada/followers", bob).status_code == 200
        banned = dict(net.banned)
    assert list(banned) == ["eve"]
    assert "2 accounts seen from 127.0.0.2" in banned["eve"]


def test_a_per_endpoint_limit_refuses_one_view_and_not_the_others(via):
    clock = _Clock()
    with DemoSocialNetwork(["ada"], ACCOUNTS, endpoint_rate_limit=(2, 60.0), clock=clock) as net:
        _, alice = _login(via[A], net, "alice")
        _, eve = _login(via[B], net, "eve")
        for _ in range(2):
            assert _get(via[A], net, "/u/ada/followers", alice).status_code == 200
        before = time.time()
        limited = _get(via[A], net, "/u/ada/followers?page=2", alice)
        assert limited.status_code == 429
        assert limited.headers["retry-after"] == "61"
        reset = limited.headers["x-rate-limit-reset"]
        assert reset.isdigit() and int(reset) > before
        # The other views of the account, and the same view for another account, still answer
        for view in ("posts", "followings", "replies", ""):
            assert _get(via[A], net, f"/u/ada/{view}", alice).status_code == 200
        assert _get(via[B], net, "/u/ada/followers", eve).status_code == 200
        # After the window, the view answers again
        clock.now += 61
        assert _get(via[A], net, "/u/ada/followers", alice).status_code == 200
        too_fast = net.too_fast
    assert too_fast == 1


def test_a_session_expires_and_logins_are_counted(via):
    clock = _Clock()
    with DemoSocialNetwork(["ada"], ACCOUNTS, session_max_age_s=300, clock=clock) as net:
        _, session = _login(via[A], net, "alice")
        assert _get(via[A], net, "/u/ada/followers", session).status_code == 200
        clock.now += 301
        assert _get(via[A], net, "/u/ada/followers", session).status_code == 401
        assert _get(via[A], net, "/u/ada/posts", session).status_code == 200  # public
        assert _login(via[A], net, "alice", "wrong")[0].status_code == 403
        _, fresh = _login(via[A], net, "alice")
        assert _get(via[A], net, "/u/ada/followers", fresh).status_code == 200
        logins = Counter(net.logins)
    assert logins == Counter({"alice": 2})


def test_bad_address_rules_are_refused_at_construction():
    with pytest.raises(ValueError, match="max_accounts_per_address"):
        DemoSocialNetwork(["ada"], ACCOUNTS, max_accounts_per_address=0)
    with pytest.raises(ValueError, match="address_window_s"):
        DemoSocialNetwork(["ada"], ACCOUNTS, address_window_s=0)


sightings = st.lists(
    st.tuples(st.sampled_from("uvwxyz"), st.sampled_from([A, B, "127.0.0.4"])), max_size=40
)


@given(sightings, st.integers(min_value=1, max_value=3))
def test_address_watch_leaves_at_most_the_limit_of_accounts_on_an_address(seen, limit):
    watch = AddressWatch(600, ban_moving=False, max_accounts_per_address=limit)
    banned: set[str] = set()
    at: dict[str, set[str]] = {}
    for account, address in seen:
        at.setdefault(address, set()).add(account)
        if watch.see(account, address, now=0.0) is not None:
            banned.add(account)  # the network keeps the ban
    assert all(len(accounts - banned) <= limit for accounts in at.values())


@given(sightings)
def test_address_watch_bans_an_account_exactly_when_it_has_moved(seen):
    watch = AddressWatch(600, ban_moving=True, max_accounts_per_address=None)
    addresses: dict[str, set[str]] = {}
    for account, address in seen:
        addresses.setdefault(account, set()).add(address)
        assert (watch.see(account, address, now=0.0) is not None) == (len(addresses[account]) > 1)
