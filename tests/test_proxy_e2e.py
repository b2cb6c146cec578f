"""Proxies on the real RabbitMQ with two `dramatiq` worker groups (two processes each) and the
multi-process MongoDB server, on the demo social network that bans an account it sees from two
addresses and an address it sees used by two accounts.

Judged from outside: by the proxies' own logs and the network's view of each account. Every
account's requests left through its bound proxy, none was banned, each logged in once; a proxy
that refuses connections rests, and its batch is admitted again through another proxy.
"""

from __future__ import annotations

import pytest

from crawlsched.demo.forward_proxy import ForwardProxy
from crawlsched.demo.social import DemoSocialNetwork
from crawlsched.planning.run_names import FINISHED
from crawlsched.reference import ProxyRow
from crawlsched.resources.proxy_health import COOLING, proxy_state
from crawlsched.resources.rules import AccountLimits
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from tests.support.proxy_runs import fire, load_proxied, ticking_until_finished
from tests.support.waiting import wait_for
from tests.support.workers import TEST_SECRET_KEY, TEST_SIGNING_KEY, DramatiqWorkers, crawlsched_env

pytestmark = [pytest.mark.rabbitmq, pytest.mark.multiprocess]

HANDLES = ["ada", "bob", "cy", "dan", "eve"]  # the friend crawl's
# The public crawl's: other profiles, so that neither schedule's targets take the other's jobs
PUBLIC = ["fay", "gus", "hal", "ivy", "jon"]
ACCOUNTS = {"alice": "pw-a", "bert": "pw-b"}
BINDINGS = {"alice": "home-1", "bert": "home-2"}
ADDRESSES = {"home-1": "127.0.0.41", "home-2": "127.0.0.42"}


def test_two_worker_groups_send_each_account_through_its_proxy_and_route_around_a_dead_one(
    rabbitmq_broker, rabbitmq_url, multiprocess_mongo_url, mongo_database_name
):
    rt = Runtime(
        Settings(
            mongo_url=multiprocess_mongo_url,
            mongo_db=mongo_database_name,
            broker_url=rabbitmq_url,
            secret_key=TEST_SECRET_KEY,
            message_signing_key=TEST_SIGNING_KEY,
        )
    )
    env = crawlsched_env(
        rabbitmq_url,
        multiprocess_mongo_url,
        mongo_database_name,
        CRAWLSCHED_PROXY_ALLOW_NETWORKS='["127.0.0.1/32"]',
        CRAWLSCHED_ADMISSION_WAIT_S="600",
    )
    network = DemoSocialNetwork(
        HANDLES + PUBLIC, ACCOUNTS, ban_moving_accounts=True, max_accounts_per_address=1
    )
    home = {
        "home-1": ForwardProxy(ADDRESSES["home-1"], "proxy-user", "proxy-pw"),
        "home-2": ForwardProxy(ADDRESSES["home-2"]),
    }
    dead, spare = ForwardProxy("127.0.0.43", mode="refuse"), ForwardProxy("127.0.0.44")
    groups = [DramatiqWorkers(env, processes=2, threads=2) for _ in range(2)]
    with network as net, home["home-1"], home["home-2"], dead, spare:
        media = load_proxied(
            rt,
            net.base_url,
            {"twitter": ProxyRow(group="home"), "youtube": ProxyRow(group="dc")},
        )
        now = rt.now()
        rt.proxies.add_proxy(
            "home-1", home["home-1"].url, now, "home", 0, 2, "proxy-user", "proxy-pw"
        )
        rt.proxies.add_proxy("home-2", home["home-2"].url, now, "home", 0, 2)
        rt.proxies.add_proxy("dead", dead.url, now, "dc", 0, 4)
        rt.proxies.add_proxy("spare", spare.url, now, "dc", 0, 4)
        rt.proxies.set_enabled("spare", False, now)  # the public crawl meets the dead one first
        for username, password in ACCOUNTS.items():
            rt.inventory.add_account("twitter", username, password, AccountLimits(), now)
            rt.proxies.bind_account("twitter", username, BINDINGS[username], None, now)
        for group in groups:
            group.start()
        try:
            # When a crawl behind the login (paginated friend lists, several batches per
            # account) and a public one run at once
            friends = fire(rt, "twitter", media["twitter"], "friend", HANDLES, "e2e-friends")
            profiles = fire(rt, "youtube", media["youtube"], "profile", PUBLIC, "e2e-profiles")
            wait_for(
                lambda: proxy_state(rt.proxies.proxy("dead"), rt.now()) == COOLING,
                120,
                "the refusing proxy to rest",
            )
            assert rt.runs.get(profiles)["state"] != FINISHED  # its pages wait, not failed
            rt.proxies.set_enabled("spare", True, rt.now())
            friends_run = ticking_until_finished(rt, friends, "the friend crawl", 240)
            profiles_run = ticking_until_finished(rt, profiles, "the public crawl", 240)
        except BaseException:
            for group in groups:
                print(group.output()[-3000:])
            raise
        finally:
            for group in groups:
                group.stop()

    # Then both runs succeeded whole
    assert set(friends_run["counts"]) == {"succeeded"}, friends_run["counts"]
    assert profiles_run["counts"] == {"succeeded": len(PUBLIC)}
    # And the network saw each account from its own proxy's address only, and banned nobody
    assert net.banned == {}
    seen = {user: set(by) for user, by in net.address_of_requests.items()}
    assert seen == {user: {ADDRESSES[BINDINGS[user]]} for user in ACCOUNTS}
    # And the proxies' own logs agree: a session cookie reached the network through one proxy
    cookies = {name: {r.cookie for r in proxy.log if r.cookie} for name, proxy in home.items()}
    assert cookies["home-1"] and cookies["home-2"]
    assert not cookies["home-1"] & cookies["home-2"]
    assert all(r.client_user == "proxy-user" for r in home["home-1"].log)
    # And each account logged in once for all its batches, in both groups' processes
    served = list(rt.db.run_resources.find({"run_id": friends}))
    assert all(row["proxy"] == BINDINGS[row["account"]] for row in served)
    assert len(served) > len(ACCOUNTS)
    assert dict(net.logins) == dict.fromkeys(ACCOUNTS, 1)
    # And the dead proxy rested, let nothing through, and the public crawl went out through
    # the spare one
    assert rt.proxies.proxy("dead")["failures"] >= 1 and dead.log == []
    assert {r.path for r in spare.log} >= {f"/u/{h}" for h in PUBLIC}
    assert rt.leases.live_leases(rt.now()) == []
