"""The pool inventory (`resources/inventory.py`) on the embedded store: what each operator and
probe command writes, read back from the documents themselves.

Every change must bump the resource's `version` (a lease decision taken on the old document
then loses its compare-and-set), the secret never leaves the store in a listing, and a node
found down loses its leases. Times are injected; nothing here sleeps.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from crawlsched.errors import AccountNotFound, NodeNotFound, SecretKeyMissing
from crawlsched.resources.inventory import MongoPoolInventory
from crawlsched.resources.rules import AccountLimits
from crawlsched.resources.secrets import SecretBox, generate_key
from crawlsched.store.client import drop_embedded, open_database
from tests.support.factories import NOW

KEY = generate_key()
LIMITS = AccountLimits(max_concurrent=2, cooldown_s=5.0, rate_uses=3, rate_window_s=60.0)


def at(seconds: float):
    return NOW + timedelta(seconds=seconds)


@pytest.fixture
def db(embedded_mongo_url):
    db = open_database(embedded_mongo_url, "crawlsched")
    yield db
    drop_embedded(embedded_mongo_url)


@pytest.fixture
def inventory(db):
    return MongoPoolInventory(db, SecretBox(KEY))


def stored_account(db, media="twitter", username="alice"):
    return db.accounts.find_one({"media_name": media, "username": username}, {"_id": 0})


def stored_node(db, url="http://node-a"):
    return db.selenium_nodes.find_one({"_id": url})


def lease(lease_id: str, expires_s: float) -> dict:
    return {"id": lease_id, "holder": "d1", "expires_at": at(expires_s)}


def give_leases(db, collection: str, query: dict, leases: list[dict]) -> None:
    """Leases written straight into a document, as a grant would have left them."""
    db[collection].update_one(query, {"$set": {"leases": leases}})


# -- accounts ---------------------------------------------------------------------------------


def test_add_account_stores_limits_an_encrypted_secret_and_a_fresh_state(db, inventory):
    assert inventory.add_account("twitter", "alice", "s3cret", LIMITS, NOW) is True
    doc = stored_account(db)
    token = doc.pop("secret_enc")
    assert SecretBox(KEY).decrypt(token) == "s3cret" and "s3cret" not in token
    assert doc == {
        "media_name": "twitter",
        "username": "alice",
        "max_concurrent": 2,
        "cooldown_s": 5.0,
        "rate_uses": 3,
        "rate_window_s": 60.0,
        "updated_at": NOW,
        "status": "active",
        "status_reason": None,
        "leases": [],
        "last_leased_at": None,
        "cooling_until": None,
        "created_at": NOW,
        "version": 1,
    }


def test_add_account_again_updates_secret_and_limits_and_keeps_its_state(db, inventory):
    inventory.add_account("twitter", "alice", "old", LIMITS, NOW)
    inventory.set_account_status("twitter", "alice", "banned", "login rejected", at(1))
    give_leases(db, "accounts", {"username": "alice"}, [lease("account.a", 30)])

    assert inventory.add_account("twitter", "alice", "new", AccountLimits(), at(2)) is False
    doc = stored_account(db)
    assert SecretBox(KEY).decrypt(doc["secret_enc"]) == "new"
    assert (doc["max_concurrent"], doc["cooldown_s"], doc["rate_uses"], doc["rate_window_s"]) == (
        1,
        0.0,
        None,
        None,
    )
    # Updating the secret does not lift a ban, drop leases or change when it was created.
    assert (doc["status"], doc["status_reason"]) == ("banned", "login rejected")
    assert [x["id"] for x in doc["leases"]] == ["account.a"]
    assert (doc["created_at"], doc["updated_at"], doc["version"]) == (NOW, at(2), 3)
    # One document per (media, username); another media is another account.
    assert inventory.add_account("instagram", "alice", "pw", AccountLimits(), NOW) is True
    assert db.accounts.count_documents({"username": "alice"}) == 2


@pytest.mark.parametrize(("username", "ok"), [("", False), ("a", True), ("a" * 200, True),
                                              ("a" * 201, False)])  # fmt: skip
def test_add_account_username_is_1_to_200_characters(db, inventory, username, ok):
    if ok:
        assert inventory.add_account("twitter", username, "pw", LIMITS, NOW) is True
    else:
        with pytest.raises(ValueError, match=r"^username must be 1 to 200 characters$"):
            inventory.add_account("twitter", username, "pw", LIMITS, NOW)
        assert db.accounts.count_documents({}) == 0


def test_add_account_without_a_key_writes_nothing(db):
    with pytest.raises(SecretKeyMissing):
        MongoPoolInventory(db, SecretBox(None)).add_account("twitter", "bob", "pw", LIMITS, NOW)
    assert db.accounts.count_documents({}) == 0


def test_accounts_are_listed_without_secret_by_media_then_username(inventory):
    # Equivalent on the embedded store (the mutation run's store): a sort direction of 2
    # instead of 1 is ascending to mongomock; a real server would refuse it, which only the
    # multi-process tests, left out of the mutation run, could show.
    for media, user in [("twitter", "zed"), ("instagram", "bob"), ("twitter", "amy")]:
        inventory.add_account(media, user, "pw", LIMITS, NOW)
    listed = inventory.accounts()
    assert [(a["media_name"], a["username"]) for a in listed] == [
        ("instagram", "bob"),
        ("twitter", "amy"),
        ("twitter", "zed"),
    ]
    assert all("secret_enc" not in a and a["max_concurrent"] == 2 for a in listed)
    assert [a["username"] for a in inventory.accounts("twitter")] == ["amy", "zed"]
    assert inventory.accounts("tiktok") == []


def test_set_account_status_records_who_why_and_when(db, inventory):
    inventory.add_account("twitter", "alice", "pw", LIMITS, NOW)
    db.accounts.update_one({"username": "alice"}, {"$set": {"cooling_until": at(100)}})

    doc = inventory.set_account_status("twitter", "alice", "disabled", "holiday", at(1))
    assert "secret_enc" not in doc
    assert (doc["status"], doc["status_reason"], doc["status_at"]) == ("disabled", "holiday", at(1))
    assert doc["version"] == 2  # the document after the change is returned
    assert doc["cooling_until"] == at(100)  # disabling leaves the site's cooldown as it was
    assert doc["previous_status"] == "active"  # what it was: an event says when it changed

    doc = inventory.set_account_status("twitter", "alice", "banned", None, at(2))
    assert (doc["status"], doc["status_reason"], doc["version"]) == ("banned", None, 3)
    assert doc["cooling_until"] == at(100)

    # An operator's "enable" means usable now: the site's cooldown is lifted too.
    doc = inventory.set_account_status("twitter", "alice", "active", None, at(3))
    assert (doc["status"], doc["cooling_until"], doc["version"]) == ("active", None, 4)
    assert stored_account(db)["status"] == "active"


def test_set_account_status_refuses_an_unknown_status_or_account(db, inventory):
    inventory.add_account("twitter", "alice", "pw", LIMITS, NOW)
    with pytest.raises(
        ValueError,
        match=r"^unknown account status 'cooling'; known: \('active', 'banned', 'disabled'\)$",
    ):
        inventory.set_account_status("twitter", "alice", "cooling", None, NOW)
    assert stored_account(db)["version"] == 1
    with pytest.raises(AccountNotFound) as missing:
        inventory.set_account_status("instagram", "alice", "banned", None, NOW)
    assert (missing.value.media_name, missing.value.username) == ("instagram", "alice")


def test_ban_by_lease_bans_the_account_holding_it(db, inventory):
    inventory.add_account("twitter", "alice", "pw", LIMITS, NOW)
    inventory.add_account("twitter", "bob", "pw", LIMITS, NOW)
    give_leases(db, "accounts", {"username": "bob"}, [lease("account.b", 30)])

    before = inventory.ban_by_lease("account.b", "x" * 301, at(1))
    assert before["username"] == "bob" and "secret_enc" not in before
    bob, alice = stored_account(db, username="bob"), stored_account(db, username="alice")
    assert (bob["status"], bob["status_reason"], bob["status_at"]) == ("banned", "x" * 300, at(1))
    assert bob["version"] == 2
    assert (alice["status"], alice["version"]) == ("active", 1)
    assert inventory.ban_by_lease("account.unknown", "why", at(1)) is None


def test_cool_by_lease_cools_the_account_holding_it_and_leaves_it_active(db, inventory):
    inventory.add_account("twitter", "alice", "pw", LIMITS, NOW)
    inventory.add_account("twitter", "bob", "pw", LIMITS, NOW)
    give_leases(db, "accounts", {"username": "alice"}, [lease("account.a", 30)])

    before = inventory.cool_by_lease("account.a", at(90), "429 " + "y" * 400)
    assert before["username"] == "alice" and "secret_enc" not in before
    alice, bob = stored_account(db, username="alice"), stored_account(db, username="bob")
    assert (alice["cooling_until"], alice["status_reason"]) == (at(90), ("429 " + "y" * 400)[:300])
    assert (alice["status"], alice["version"]) == ("active", 2)
    assert (bob["cooling_until"], bob["version"]) == (None, 1)
    assert inventory.cool_by_lease("account.unknown", at(90), "429") is None


# -- nodes ------------------------------------------------------------------------------------


def test_add_node_stores_it_up_and_enabled(db, inventory):
    assert inventory.add_node("http://node-a", "grid", 4, NOW) is True
    assert stored_node(db) == {
        "_id": "http://node-a",
        "url": "http://node-a",
        "kind": "grid",
        "capacity": 4,
        "enabled": True,
        "draining": False,
        "health": "up",
        "health_reason": None,
        "checked_at": NOW,
        "leases": [],
        "last_leased_at": None,
        "created_at": NOW,
        "version": 1,
    }


def test_add_node_again_resets_it_and_keeps_its_leases(db, inventory):
    inventory.add_node("http://node-a", "chromedriver", 1, NOW)
    inventory.set_draining("http://node-a", True)
    inventory.mark_node("http://node-a", False, "refused", at(1), None)
    give_leases(db, "selenium_nodes", {"_id": "http://node-a"}, [lease("selenium.a", 30)])

    assert inventory.add_node("http://node-a", "grid", 3, at(2)) is False
    doc = stored_node(db)
    assert (doc["kind"], doc["capacity"], doc["draining"], doc["health"]) == (
        "grid",
        3,
        False,
        "up",
    )
    assert (doc["health_reason"], doc["checked_at"], doc["created_at"]) == (None, at(2), NOW)
    assert [x["id"] for x in doc["leases"]] == ["selenium.a"]
    assert doc["version"] == 4


@pytest.mark.parametrize(("capacity", "ok"), [(0, False), (1, True), (1000, True), (1001, False),
                                              (-1, False)])  # fmt: skip
def test_add_node_capacity_is_1_to_1000(db, inventory, capacity, ok):
    if ok:
        assert inventory.add_node("http://node-a", "grid", capacity, NOW) is True
        assert stored_node(db)["capacity"] == capacity
    else:
        with pytest.raises(
            ValueError, match=rf"^capacity must be between 1 and 1000, got {capacity}$"
        ):
            inventory.add_node("http://node-a", "grid", capacity, NOW)
        assert db.selenium_nodes.count_documents({}) == 0


def test_nodes_are_listed_by_url_and_read_one_by_one(inventory):
    # Equivalent mutants of `nodes()`: `find(None)` is `find({})`; `.sort("_id")` and
    # `.sort("_id", None)` are pymongo's ascending default; direction 2 as for `accounts()`.
    for url in ["http://node-c", "http://node-a", "http://node-b"]:
        inventory.add_node(url, "chromedriver", 1, NOW)
    assert [n["url"] for n in inventory.nodes()] == ["http://node-a", "http://node-b",
                                                     "http://node-c"]  # fmt: skip
    assert inventory.node("http://node-b")["url"] == "http://node-b"
    with pytest.raises(NodeNotFound) as missing:
        inventory.node("http://node-x")
    assert missing.value.url == "http://node-x"


def test_set_draining_and_back(db, inventory):
    inventory.add_node("http://node-a", "chromedriver", 1, NOW)
    doc = inventory.set_draining("http://node-a", True)
    assert (doc["draining"], doc["version"]) == (True, 2)  # the document after the change
    doc = inventory.set_draining("http://node-a", False)
    assert (doc["draining"], doc["version"]) == (False, 3)
    assert stored_node(db)["draining"] is False
    with pytest.raises(NodeNotFound) as missing:
        inventory.set_draining("http://node-x", True)
    assert missing.value.url == "http://node-x"


def test_remove_node(db, inventory):
    inventory.add_node("http://node-a", "chromedriver", 1, NOW)
    inventory.add_node("http://node-b", "chromedriver", 1, NOW)
    inventory.remove_node("http://node-a")
    assert [n["_id"] for n in db.selenium_nodes.find({})] == ["http://node-b"]
    with pytest.raises(NodeNotFound) as missing:
        inventory.remove_node("http://node-a")
    assert missing.value.url == "http://node-a"


def test_due_for_probe_is_enabled_nodes_checked_an_interval_ago_or_never(db, inventory):
    checked = {"never": None, "at-0": NOW, "at-40": at(40), "at-41": at(41), "off": NOW}
    for name, when in checked.items():
        inventory.add_node(f"http://{name}", "chromedriver", 1, NOW)
        db.selenium_nodes.update_one(
            {"_id": f"http://{name}"},
            {"$set": {"checked_at": when, "enabled": name != "off", "leases": [lease("x", 99)]}},
        )
    # At 100 s with a 60 s interval: checked at 40 s or earlier (or never) is due; not disabled.
    due = inventory.due_for_probe(at(100), 60)
    assert sorted(n["_id"] for n in due) == ["http://at-0", "http://at-40", "http://never"]
    assert all("leases" not in n and n["kind"] == "chromedriver" for n in due)


def test_claim_probe_one_ticker_per_interval(db, inventory):
    inventory.add_node("http://node-a", "chromedriver", 1, NOW)
    seen = inventory.due_for_probe(at(60), 60)[0]
    also_seen = dict(seen)  # a second ticker read the same document
    assert inventory.claim_probe(seen, at(60)) is True
    assert stored_node(db)["checked_at"] == at(60)
    assert inventory.claim_probe(also_seen, at(60.5)) is False
    assert stored_node(db)["checked_at"] == at(60)


def test_mark_node_healthy_keeps_leases_and_may_resize(db, inventory):
    # Equivalent mutants of `mark_node`: without `return_document` the default is BEFORE; with
    # `return_document=None` mongomock reads it as BEFORE (pymongo would refuse it at once, on
    # a real server only, which the mutation run leaves out).
    inventory.add_node("http://node-a", "grid", 2, NOW)
    inventory.mark_node("http://node-a", False, "refused", at(1), None)
    give_leases(db, "selenium_nodes", {"_id": "http://node-a"}, [lease("selenium.a", 30)])

    assert inventory.mark_node("http://node-a", True, "ignored", at(2), 5) == ("down", [])
    doc = stored_node(db)
    assert (doc["health"], doc["health_reason"], doc["checked_at"]) == ("up", None, at(2))
    assert (doc["capacity"], doc["version"]) == (5, 3)
    assert [x["id"] for x in doc["leases"]] == ["selenium.a"]
    # No capacity reported (a chromedriver): the configured one stays.
    assert inventory.mark_node("http://node-a", True, None, at(3), None) == ("up", [])
    assert stored_node(db)["capacity"] == 5


def test_mark_node_down_revokes_its_live_leases(db, inventory):
    inventory.add_node("http://node-a", "grid", 3, NOW)
    give_leases(db, "selenium_nodes", {"_id": "http://node-a"},
                [lease("selenium.live", 30), lease("selenium.gone", 5)])  # fmt: skip

    health, revoked = inventory.mark_node("http://node-a", False, "z" * 400, at(5), 7)
    assert health == "up"
    assert [x["id"] for x in revoked] == ["selenium.live"]  # the expired one was nobody's
    doc = stored_node(db)
    assert (doc["health"], doc["health_reason"], doc["leases"]) == ("down", "z" * 300, [])
    assert (doc["checked_at"], doc["capacity"], doc["version"]) == (at(5), 7, 2)

    inventory.mark_node("http://node-a", False, None, at(6), None)
    assert stored_node(db)["health_reason"] == ""


def test_mark_node_of_an_unknown_node_changes_nothing(db, inventory):
    assert inventory.mark_node("http://node-x", False, "refused", NOW, None) == (None, [])
    assert db.selenium_nodes.count_documents({}) == 0


def test_overview_counts_resources_usable_capacity_and_held(db, inventory):
    # Equivalent mutant: `capacity_of(None, n)` for a node is `capacity_of("selenium", n)`, since
    # every pool but "account" reads a node's `capacity`.
    inventory.add_account("twitter", "free", "pw", AccountLimits(max_concurrent=3), NOW)
    inventory.add_account("twitter", "busy", "pw", AccountLimits(max_concurrent=2), NOW)
    inventory.add_account("instagram", "banned", "pw", AccountLimits(max_concurrent=4), NOW)
    inventory.set_account_status("instagram", "banned", "banned", None, NOW)
    inventory.add_account("instagram", "cooling", "pw", AccountLimits(max_concurrent=6), NOW)
    db.accounts.update_one({"username": "cooling"}, {"$set": {"cooling_until": at(3)}})
    give_leases(
        db, "accounts", {"username": "busy"}, [lease("account.1", 30), lease("account.2", 5)]
    )
    inventory.add_node("http://up", "grid", 5, NOW)
    inventory.add_node("http://down", "grid", 7, NOW)
    inventory.add_node("http://draining", "grid", 11, NOW)
    inventory.mark_node("http://down", False, "refused", NOW, None)
    inventory.set_draining("http://draining", True)
    give_leases(db, "selenium_nodes", {"_id": "http://draining"}, [lease("selenium.1", 30)])

    assert inventory.overview(at(1)) == {
        # Capacity of accounts counts every account; of nodes, only those up.
        "account": {"resources": 4, "usable": 2, "capacity": 15, "held": 2},
        "selenium": {"resources": 3, "usable": 1, "capacity": 5, "held": 1},
    }
    later = inventory.overview(at(5))["account"]
    assert (later["usable"], later["held"]) == (3, 1)  # cooled down at 3 s; account.2 expired
