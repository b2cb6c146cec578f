"""Proxies in real runs on the demo social network, which bans an account it sees from two
addresses and an address it sees used by two accounts.

Three forward proxies on loopback, each leaving from its own address (127.0.0.11-13), one
asking for credentials. Each account is bound to one: the network then sees every account
from its proxy's address only, bans nobody, and the account logs in once, its session kept
between batches. A proxy that refuses connections rests, and its batch is admitted again
through another proxy.
"""

from __future__ import annotations

from crawlsched.demo.forward_proxy import ForwardProxy
from crawlsched.demo.social import DemoSocialNetwork
from crawlsched.planning.run_names import FINISHED
from crawlsched.reference import ProxyRow
from crawlsched.resources.proxy_health import COOLING, proxy_state
from crawlsched.resources.rules import AccountLimits
from crawlsched.runtime import get_runtime
from tests.support.proxy_runs import fire, load_proxied, ticking_until_finished
from tests.support.waiting import wait_for

HANDLES = ["ada", "bob", "cy", "dan", "eve", "fay"]
ACCOUNTS = {"alice": "pw-a", "bert": "pw-b", "carl": "pw-c"}
BINDINGS = {"alice": "p1", "bert": "p2", "carl": "p3"}
ADDRESSES = {"p1": "127.0.0.11", "p2": "127.0.0.12", "p3": "127.0.0.13"}
PROXIED = {"allowed": {"proxy_allow_networks": ["127.0.0.1/32"]}}


def test_bound_accounts_go_out_through_their_proxies_only_and_nobody_is_banned(stub_pipeline):
    stub_pipeline(threads=4, admission_wait_s=600, **PROXIED["allowed"])
    rt = get_runtime()
    network = DemoSocialNetwork(
        HANDLES, ACCOUNTS, ban_moving_accounts=True, max_accounts_per_address=1
    )
    proxies = {
        "p1": ForwardProxy(ADDRESSES["p1"], "proxy-user", "proxy-pw"),
        "p2": ForwardProxy(ADDRESSES["p2"]),
        "p3": ForwardProxy(ADDRESSES["p3"]),
    }
    with network as net, proxies["p1"], proxies["p2"], proxies["p3"]:
        media_id = load_proxied(
            rt, net.base_url, {"twitter": ProxyRow(block_markers=["proxy-blocked"])}
        )["twitter"]
        now = rt.now()
        for name, proxy in proxies.items():
            credentials = ("proxy-user", "proxy-pw") if name == "p1" else (None, None)
            rt.proxies.add_proxy(
                name, proxy.url, now, "home", 0, 2, username=credentials[0], password=credentials[1]
            )
        for username, password in ACCOUNTS.items():
            rt.inventory.add_account("twitter", username, password, AccountLimits(), now)
            rt.proxies.bind_account("twitter", username, BINDINGS[username], None, now)

        run = ticking_until_finished(
            rt, fire(rt, "twitter", media_id, "friend", HANDLES, "friends"), "run"
        )

        assert run["counts"].get("succeeded", 0) >= len(HANDLES)
        assert set(run["counts"]) == {"succeeded"}
        assert net.banned == {}
        seen = {user: set(by_address) for user, by_address in net.address_of_requests.items()}
        assert seen == {user: {ADDRESSES[BINDINGS[user]]} for user in seen}
        assert set(seen) <= set(ACCOUNTS) and seen  # the accounts that served were seen
        # Nothing left from the worker's own address, and the proxy's credentials reached the
        # proxy only: p1 let nobody through without them
        assert all(not any(r.client_user for r in p.log) for n, p in proxies.items() if n != "p1")
        assert proxies["p1"].refused == 0
        # One login per account that served, however many batches it served
        served = list(rt.db.run_resources.find({}))
        assert len(served) > len(seen)
        assert all(row["proxy"] == BINDINGS[row["account"]] for row in served)
        assert dict(net.logins) == dict.fromkeys(seen, 1)


def test_a_refusing_proxy_rests_and_its_batch_goes_out_through_another(stub_pipeline):
    stub_pipeline(threads=2, admission_wait_s=600, **PROXIED["allowed"])
    rt = get_runtime()
    dead, alive = ForwardProxy("127.0.0.14", mode="refuse"), ForwardProxy("127.0.0.15")
    with DemoSocialNetwork(HANDLES, {}) as net, dead, alive:
        media_id = load_proxied(rt, net.base_url, {"youtube": ProxyRow(group="dc")})["youtube"]
        now = rt.now()
        rt.proxies.add_proxy("dead", dead.url, now, "dc", 0, 4)
        rt.proxies.add_proxy("alive", alive.url, now, "dc", 0, 4)
        rt.proxies.set_enabled("alive", False, now)  # the batch meets the dead one first

        run_id = fire(rt, "youtube", media_id, "profile", HANDLES[:3], "profiles")
        wait_for(
            lambda: proxy_state(rt.proxies.proxy("dead"), rt.now()) == COOLING,
            60,
            "the refusing proxy to rest",
        )
        assert rt.runs.get(run_id)["state"] != FINISHED  # its pages wait, they did not fail
        rt.proxies.set_enabled("alive", True, rt.now())
        run = ticking_until_finished(rt, run_id, "the run, through the other proxy")

    assert run["counts"] == {"succeeded": 3}
    assert rt.proxies.proxy("dead")["failures"] >= 1
    assert {r.path for r in alive.log} >= {f"/u/{h}" for h in HANDLES[:3]}
    assert dead.log == []  # it never let a request through
