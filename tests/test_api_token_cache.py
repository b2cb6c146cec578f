"""The API remembers a verified token for a few seconds, and never past a revocation.

The cache alone: an entry is answered only while it is younger than its time to live and no
token was revoked in the process since it was filled (checked against a model of that rule
over random fills, reads, revocations and clock steps). Through the API: a remembered token
is not read from the store again; a revoke in the server's process is refused on the next
request; a revoke written to the store by another process is refused once the time to live
has passed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.api.token_cache import TokenCache
from crawlsched.store.tokens import revocations
from tests.support.api import ApiServer, seeded_runtime
from tests.support.waiting import wait_for

TOKENS = ["cs_a_1", "cs_b_2", "cs_c_3"]
TTL = 5.0

steps = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(TOKENS)),
        st.tuples(st.just("get"), st.sampled_from(TOKENS)),
        st.tuples(st.just("revoke"), st.none()),
        st.tuples(st.just("tick"), st.sampled_from([0.0, 1.0, 2.5, 4.999, 5.0, 7.0])),
    ),
    max_size=40,
)


@settings(max_examples=300, derandomize=True)
@given(steps)
def test_token_cache_answers_only_fresh_entries_filled_since_the_last_revocation(steps):
    cache = TokenCache(TTL, max_entries=len(TOKENS))
    now, revoked = 100.0, 0
    filled: dict[str, tuple[float, int]] = {}  # the model: token -> (filled at, revocations)
    for action, arg in steps:
        if action == "put":
            cache.put(arg, {"_id": arg, "role": "read"}, revoked, now)
            filled[arg] = (now, revoked)
        elif action == "get":
            got = cache.get(arg, revoked, now)
            fresh = arg in filled and filled[arg][1] == revoked and now - filled[arg][0] < TTL
            assert (got is not None) == fresh, (arg, now, revoked, filled)
            if fresh:
                assert got == {"_id": arg, "role": "read"}
            else:
                filled.pop(arg, None)
        elif action == "revoke":
            revoked += 1
        else:
            now += arg


def test_token_cache_hands_out_copies_and_drops_the_oldest():
    cache = TokenCache(TTL, max_entries=2)
    for i, token in enumerate(TOKENS):
        cache.put(token, {"_id": token}, 0, float(i))
    assert cache.get(TOKENS[0], 0, 2.0) is None  # the oldest went when the third came
    row = cache.get(TOKENS[2], 0, 2.0)
    row["role"] = "admin"
    assert cache.get(TOKENS[2], 0, 2.0) == {"_id": TOKENS[2]}


def test_token_cache_of_zero_seconds_remembers_nothing():
    cache = TokenCache(0)
    cache.put(TOKENS[0], {"_id": "a"}, 0, 1.0)
    assert cache.get(TOKENS[0], 0, 1.0) is None


def test_token_cache_refuses_a_negative_time_to_live():
    with pytest.raises(ValueError, match="api_token_cache_s"):
        TokenCache(-1)


@pytest.fixture
def api(request) -> Iterator[ApiServer]:
    from crawlsched.store.client import drop_embedded

    url = f"mongomock://api-token-cache-{request.node.name}"
    rt = seeded_runtime(url)
    rt.settings = rt.settings.model_copy(update={"api_token_cache_s": request.param})
    try:
        with ApiServer(rt) as server:
            yield server
    finally:
        drop_embedded(url)


@pytest.mark.parametrize("api", [60.0], indirect=True)
def test_a_remembered_token_is_not_read_again_and_a_revoke_here_counts_at_once(api, monkeypatch):
    rt = api.runtime
    row, token = rt.tokens.create("read", "cached", rt.now())
    reads = []
    verify = rt.tokens.verify
    monkeypatch.setattr(rt.tokens, "verify", lambda t: reads.append(t) or verify(t))
    headers = {"Authorization": f"Bearer {token}"}
    for _ in range(3):
        assert api.anonymous.get("/v1/runs", headers=headers).status_code == 200
    assert len(reads) == 1
    # Revoked through a token store of this process (not the API's own): refused at once.
    before = revocations()
    type(rt.tokens)(rt.db).revoke(row["_id"], rt.now())
    assert revocations() > before
    assert api.anonymous.get("/v1/runs", headers=headers).status_code == 401


@pytest.mark.parametrize("api", [0.3], indirect=True)
def test_a_token_revoked_by_another_process_is_refused_once_its_entry_is_old(api):
    rt = api.runtime
    row, token = rt.tokens.create("read", "elsewhere", rt.now())
    headers = {"Authorization": f"Bearer {token}"}
    assert api.anonymous.get("/v1/runs", headers=headers).status_code == 200
    # Written straight to the store, as `tokens revoke` in another process would: this
    # process's revocation count does not move, only the entry's age ends it.
    rt.db.api_tokens.update_one({"_id": row["_id"]}, {"$set": {"revoked_at": rt.now()}})
    wait_for(
        lambda: api.anonymous.get("/v1/runs", headers=headers).status_code == 401,
        30,
        "the revoked token to be refused",
    )


def test_a_revoke_racing_a_request_s_store_read_leaves_no_valid_entry(monkeypatch):
    # Given the API's check of a token, whose store read returns the token still valid and a
    # revoke in this process comes just after that read, before the entry is remembered
    import time
    from types import SimpleNamespace

    from crawlsched.api.auth import verify_token
    from crawlsched.store.client import drop_embedded

    url = "mongomock://api-token-cache-race"
    rt = seeded_runtime(url)
    try:
        row, token = rt.tokens.create("read", "raced", rt.now())
        verify = rt.tokens.verify

        def read_then_revoked(t):
            found = verify(t)
            type(rt.tokens)(rt.db).revoke(row["_id"], rt.now())
            return found

        monkeypatch.setattr(rt.tokens, "verify", read_then_revoked)
        cache = TokenCache(60.0)
        app = SimpleNamespace(state=SimpleNamespace(token_cache=cache, runtime=rt))
        # When the request is checked (the read it made says valid)
        assert verify_token(app, token) is not None
        # Then the next request finds no entry to trust: the revoke counts at once
        assert cache.get(token, revocations(), time.monotonic()) is None
    finally:
        drop_embedded(url)
