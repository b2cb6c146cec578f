"""Every route of the OpenAPI schema, asked without a token, with a bad or revoked one, and
with a read token where it needs admin: 401 or 403 and nothing changed in the store."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from crawlsched.runtime import Runtime
from tests.support.api import ApiServer, serving

OPEN = {("GET", "/health"), ("GET", "/")}
# Example values for path parameters: the routes must refuse before they look them up.
PATH_VALUES = {
    "schedule_id": "sweep-websites",
    "run_id": "r",
    "collection": "websites",
    "job_id": "oid:6b05df31ea893d02f0cd555e",
    "row": "6b05df31ea893d02f0cd555e",
    "media": "twitter",
    "username": "alice",
    "name": "web",
    "model": "article",
    "token_id": "0123456789abcdef",
}
# Reads that need an admin token: the tokens' rows, and the whole store as a dump.
ADMIN_READS = {"/v1/tokens", "/v1/store/dump"}


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServer]:
    with serving("mongomock://api-auth") as server:
        yield server


def operations(api: ApiServer) -> list[tuple[str, str, bool]]:
    """(method, concrete path, needs admin) of every route in the schema."""
    found = []
    for template, methods in api.app.openapi()["paths"].items():
        path = re.sub(r"{(\w+)}", lambda m: PATH_VALUES[m.group(1)], template)
        for method in methods:
            if (method.upper(), template) in OPEN:
                continue
            admin = method.upper() != "GET" or template in ADMIN_READS
            found.append((method.upper(), path, admin))
    return found


def snapshot(rt: Runtime) -> dict[str, list]:
    """Every document of every collection but the tokens' own (revoking one changes it)."""
    names = [n for n in rt.db.list_collection_names() if n != "api_tokens"]
    return {n: sorted(map(repr, rt.db[n].find({}))) for n in names}


def test_every_route_refuses_missing_bad_and_revoked_tokens(api):
    rt = api.runtime
    _, revoked = rt.tokens.create("admin", "to-revoke", rt.now())
    rt.tokens.revoke(revoked.split("_")[1], rt.now())
    before = snapshot(rt)
    credentials = {
        "none": {},
        "malformed": {"Authorization": "Bearer not-a-token"},
        "wrong secret": {"Authorization": f"Bearer {api.admin_token[:-4]}AAAA"},
        "revoked": {"Authorization": f"Bearer {revoked}"},
        "basic scheme": {"Authorization": f"Basic {api.admin_token}"},
    }
    checked = 0
    for method, path, _ in operations(api):
        for what, headers in credentials.items():
            response = api.anonymous.request(method, path, headers=headers, json={})
            assert response.status_code == 401, (method, path, what, response.text)
            assert response.headers["www-authenticate"].startswith("Bearer")
            checked += 1
    assert checked >= 5 * 25
    assert snapshot(rt) == before


def test_read_tokens_cannot_change_anything(api):
    rt = api.runtime
    before = snapshot(rt)
    changing = [(m, p) for m, p, admin in operations(api) if admin]
    assert len(changing) >= 12
    for method, path in changing:
        response = api.reader.request(method, path, json={})
        assert response.status_code == 403, (method, path, response.text)
        assert "admin" in response.json()["detail"]
    assert snapshot(rt) == before


def test_read_tokens_read(api):
    paths = api.app.openapi()["paths"]
    listed = [
        template
        for template, methods in paths.items()
        if "get" in methods and "{" not in template and template.startswith("/v1/")
        and template not in ADMIN_READS
        and not any(p.get("required") for p in methods["get"].get("parameters", []))
    ]  # fmt: skip
    assert len(listed) >= 15
    for path in listed:
        assert api.reader.get(path).status_code == 200, path


def test_a_revoked_token_stops_working_at_once(api):
    rt = api.runtime
    row, token = rt.tokens.create("read", "short-lived", rt.now())
    headers = {"Authorization": f"Bearer {token}"}
    assert api.anonymous.get("/v1/stats", headers=headers).status_code == 200
    rt.tokens.revoke(row["_id"], rt.now())
    assert api.anonymous.get("/v1/stats", headers=headers).status_code == 401


def test_tokens_are_stored_hashed(api):
    rt = api.runtime
    _, token = rt.tokens.create("admin", "hashed", rt.now())
    stored = " ".join(map(repr, rt.db.api_tokens.find({})))
    assert token not in stored and token.split("_", 2)[2] not in stored
