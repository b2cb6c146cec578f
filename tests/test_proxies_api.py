"""The proxy pool through the API (FastAPI's TestClient over the embedded store): proxies
added, listed, enabled, disabled and removed, domain tiers, account bindings; the password is
write-only, a URL carrying credentials is refused with a clear message."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from crawlsched.api import create_app
from crawlsched.resources.rules import AccountLimits
from tests.support.api import seeded_runtime

PASSWORD = "pr0xy-pa55-never-shown"
DC1 = {"name": "dc-1", "url": "http://127.0.0.1:3128", "group": "dc", "max_concurrent": 2}


@dataclass
class Api:
    rt: Any
    admin: TestClient
    reader: TestClient


@pytest.fixture
def api(embedded_mongo_url: str) -> Iterator[Api]:
    rt = seeded_runtime(embedded_mongo_url)
    rt.inventory.add_account("twitter", "alice", "pw", AccountLimits(), rt.now())
    _, admin_token = rt.tokens.create("admin", "proxies-admin", rt.now())
    _, read_token = rt.tokens.create("read", "proxies-read", rt.now())
    app = create_app(rt)
    with TestClient(app) as admin, TestClient(app) as reader:
        admin.headers["Authorization"] = f"Bearer {admin_token}"
        reader.headers["Authorization"] = f"Bearer {read_token}"
        yield Api(rt, admin, reader)


def problem(response, status: int) -> str:
    assert response.status_code == status, response.text
    return response.json()["detail"]


def test_proxies_add_list_disable_enable_remove_never_answer_the_password(api: Api):
    added = api.admin.post("/v1/proxies", json={**DC1, "username": "u1", "password": PASSWORD})
    assert added.status_code == 200, added.text
    assert added.json() == {"name": "dc-1", "url": "http://127.0.0.1:3128", "group": "dc",
                            "added": True}  # fmt: skip
    again = api.admin.post("/v1/proxies", json={**DC1, "tier": 1})
    assert again.json()["added"] is False

    listed = api.reader.get("/v1/proxies")
    (row,) = listed.json()["items"]
    assert row["name"] == "dc-1" and row["group"] == "dc" and row["tier"] == 1
    assert (row["state"], row["held"], row["max_concurrent"], row["failures"]) == (
        "active",
        0,
        2,
        0,
    )
    assert "secret_enc" not in row and "password" not in row

    disabled = api.admin.post("/v1/proxies/dc-1/state", json={"enabled": False})
    assert disabled.json() == {"name": "dc-1", "enabled": False, "state": "disabled"}
    assert api.reader.get("/v1/proxies").json()["items"][0]["state"] == "disabled"
    enabled = api.admin.post("/v1/proxies/dc-1/state", json={"enabled": True})
    assert enabled.json()["state"] == "active"

    answers = [added, again, listed, disabled, enabled, api.reader.get("/v1/pools")]
    removed = api.admin.delete("/v1/proxies/dc-1")
    assert removed.json() == {"name": "dc-1", "removed": True, "unbound_accounts": 0}
    assert api.reader.get("/v1/proxies").json()["items"] == []
    for response in [*answers, removed]:
        assert PASSWORD not in response.text
    # Kept, but only encrypted: the route wrote it with the username (see add above).
    assert PASSWORD not in repr(list(api.rt.db.proxies.find({})))


@pytest.mark.parametrize(
    ("fields", "status", "message"),
    [
        ({"url": "http://u:p@127.0.0.1:3128"}, 400, "not in its URL"),
        ({"url": "ftp://127.0.0.1:21"}, 400, "scheme must be one of"),
        ({"url": "http://127.0.0.1"}, 400, "needs a host and a port"),
        ({"name": "no spaces"}, 400, "a proxy name is"),
        ({"username": "u1"}, 400, "username and password go together"),
        ({"tier": 10}, 422, "less than or equal to 9"),
    ],
)
def test_a_bad_proxy_is_refused_with_what_is_wrong_and_nothing_stored(
    api: Api, fields, status, message
):
    response = api.admin.post("/v1/proxies", json={**DC1, **fields})
    problem(response, status)
    assert message in response.text  # the detail, or the field's error (422)
    assert api.rt.db.proxies.count_documents({}) == 0


def test_an_unknown_proxy_is_404_and_a_reader_changes_nothing(api: Api):
    assert "no proxy 'nope'" in problem(api.admin.delete("/v1/proxies/nope"), 404)
    assert "no proxy" in problem(
        api.admin.post("/v1/proxies/nope/state", json={"enabled": True}), 404
    )
    assert api.reader.post("/v1/proxies", json=DC1).status_code == 403
    # `tiers` is the domains' tiers, not a proxy that DELETE could remove
    assert api.admin.delete("/v1/proxies/tiers").status_code == 405


def test_accounts_bind_to_a_proxy_or_a_group_and_unbind(api: Api):
    api.admin.post("/v1/proxies", json=DC1)
    bind = "/v1/accounts/twitter/alice/binding"
    assert "no proxy 'nope'" in problem(api.admin.post(bind, json={"proxy": "nope"}), 404)
    assert "no proxy is in group 'res'" in problem(api.admin.post(bind, json={"group": "res"}), 404)
    assert "no account 'bob'" in problem(
        api.admin.post("/v1/accounts/twitter/bob/binding", json={"proxy": "dc-1"}), 404
    )
    assert "not both" in problem(api.admin.post(bind, json={"proxy": "dc-1", "group": "dc"}), 400)

    bound = api.admin.post(bind, json={"proxy": "dc-1"}).json()
    assert bound == {"media": "twitter", "username": "alice", "binding": {"proxy": "dc-1"}}
    assert api.reader.get("/v1/proxies").json()["items"][0]["accounts"] == ["twitter/alice"]
    assert api.admin.post(bind, json={"group": "dc"}).json()["binding"] == {"group": "dc"}
    assert api.admin.post(bind, json={}).json()["binding"] is None
    assert api.reader.get("/v1/proxies").json()["items"][0]["accounts"] == []

    # Removing a proxy unbinds the accounts bound to it by name.
    api.admin.post(bind, json={"proxy": "dc-1"})
    assert api.admin.delete("/v1/proxies/dc-1").json()["unbound_accounts"] == 1


def test_tiers_pools_and_the_status_page_show_the_proxy_pool(api: Api):
    api.admin.post("/v1/proxies", json=DC1)
    api.admin.post("/v1/proxies", json={**DC1, "name": "res-1", "tier": 2})
    rt = api.rt
    rt.proxies.record_tier("twitter", None, 0, True, rt.now())

    tiers = api.reader.get("/v1/proxies/tiers").json()
    assert tiers["tiers"] == [0, 2]
    (domain,) = tiers["domains"]
    assert (domain["domain"], domain["tier"], domain["blocks"]) == ("twitter", 0, 1)

    pools = api.reader.get("/v1/pools").json()["pools"]
    assert pools["proxy"] == {"resources": 2, "usable": 2, "capacity": 4, "held": 0}
    assert set(pools) == {"account", "selenium", "proxy"}

    api.admin.post("/v1/proxies/res-1/state", json={"enabled": False})
    status = api.reader.get("/v1/status").json()["pools"]["proxies"]
    assert status["states"] == {"held": 0, "free": 1, "cooling": 0, "down": 1}
    assert [(r["name"], r["state"]) for r in status["rows"]] == [
        ("dc-1", "active"), ("res-1", "disabled")
    ]  # fmt: skip
