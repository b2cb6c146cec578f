"""The store gauges' pure folding, the metrics settings, and the multiprocess directory."""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from crawlsched.metrics import multiproc, readings
from crawlsched.planning.due import Category
from crawlsched.settings import Settings

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MEDIA = ["twitter", "instagram", "news"]
TASKS = ["profile", "publication", "article"]
KEYS = ["selenium", "account:twitter", "account:instagram"]

groups = st.lists(
    st.tuples(st.sampled_from(TASKS), st.sampled_from([*MEDIA, "unknown"]), st.integers(1, 50)),
    max_size=20,
)
task_rows = st.lists(
    st.fixed_dictionaries(
        {
            "media_name_id": st.integers(0, 3),
            "name": st.sampled_from(TASKS),
            "need_login": st.sampled_from([True, False, None, "yes"]),
            "need_selenium": st.booleans(),
            "enabled": st.sampled_from([True, False, None]),
        }
    ),
    max_size=12,
)


@given(groups, task_rows, st.lists(st.booleans(), min_size=3, max_size=3))
def test_due_by_category_keeps_every_due_job_in_exactly_one_category(groups, tasks, enabled):
    media = [
        {"media_name": m, "media_name_id": i, "enabled": on}
        for i, (m, on) in enumerate(zip(MEDIA, enabled, strict=True))
    ]
    due = readings.due_by_category(groups, media, tasks)
    assert sum(due.values()) == sum(n for _, _, n in groups)
    allowed = {c.value for c in Category} | {readings.UNPLANNABLE}
    assert {category for _, category in due} <= allowed
    # Jobs of an unknown or disabled media can never be planned
    unplannable = sum(n for _, m, n in groups if m not in MEDIA or not enabled[MEDIA.index(m)])
    assert sum(n for (_, c), n in due.items() if c == readings.UNPLANNABLE) >= unplannable


waiting_docs = st.lists(
    st.fixed_dictionaries(
        {
            "needs": st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True),
            "jobs": st.integers(1, 100),
            "enqueued_at": st.integers(0, 3600).map(lambda s: NOW - timedelta(seconds=s)),
            "wait_until": st.integers(-600, 600).map(lambda s: NOW + timedelta(seconds=s)),
        }
    ),
    max_size=20,
)


@given(waiting_docs)
def test_waiting_by_pool_counts_each_batch_once_per_pool_it_needs(docs):
    out = readings.waiting_by_pool(docs, NOW)
    assert sum(w.batches for w in out.values()) == sum(len(d["needs"]) for d in docs)
    for key, entry in out.items():
        mine = [d for d in docs if f"{key[0]}:{key[1]}".rstrip(":") in d["needs"]]
        assert entry.batches == len(mine)
        assert entry.jobs == sum(d["jobs"] for d in mine)
        assert entry.overdue == sum(d["wait_until"] <= NOW for d in mine)
        assert entry.oldest_s == max((NOW - d["enqueued_at"]).total_seconds() for d in mine)


accounts = st.lists(
    st.fixed_dictionaries(
        {
            "media_name": st.sampled_from(MEDIA[:2]),
            "status": st.sampled_from(["active", "banned", "disabled"]),
            "max_concurrent": st.integers(1, 4),
            "leases": st.lists(
                st.integers(-60, 60).map(lambda s: {"expires_at": NOW + timedelta(seconds=s)}),
                max_size=4,
            ),
        }
    ),
    max_size=10,
)


@given(accounts)
def test_account_pool_counts_usable_capacity_and_live_leases(accounts):
    slots, states = readings.account_pool(accounts, NOW)
    assert sum(states.values()) == len(accounts)
    for (pool, media), (capacity, held) in slots.items():
        assert pool == "account"
        mine = [a for a in accounts if a["media_name"] == media]
        active = [a for a in mine if a["status"] == "active"]
        assert capacity == sum(a["max_concurrent"] for a in active)
        assert held == sum(1 for a in mine for lease in a["leases"] if lease["expires_at"] > NOW)


def test_node_pool_counts_only_up_nodes_capacity():
    nodes = [
        {"health": "up", "capacity": 2},
        {"health": "down", "capacity": 5},
        {"health": "up", "capacity": 3, "draining": True},
    ]
    slots, states = readings.node_pool(nodes, NOW)
    assert slots == {("selenium", ""): (2, 0)}
    assert states == {"up": 1, "down": 1, "draining": 1}


@pytest.mark.parametrize("field", ["metrics_address", "clock_metrics_address"])
@pytest.mark.parametrize("value", ["9191", "host:", ":9191", "host:0", "host:70000", "h:x"])
def test_bad_metrics_address_is_rejected_naming_the_field(field, value):
    with pytest.raises(ValidationError, match=field):
        Settings(**{field: value})


def test_metrics_addresses_accept_host_port_and_ipv6():
    settings = Settings(metrics_address="0.0.0.0:9191", clock_metrics_address="[::1]:9192")
    assert settings.metrics_address == "0.0.0.0:9191"


def _write_db(directory, name):
    (directory / name).write_text("counts")


def test_multiprocess_directory_is_cleared_once_per_group(tmp_path):
    _write_db(tmp_path, "counter_111.db")  # left by an earlier group
    assert multiproc.prepare(tmp_path, "group-2") is True
    assert not list(tmp_path.glob("*.db"))
    _write_db(tmp_path, "counter_222.db")  # the new group's first process counts
    # A second process of the same group keeps it; the next group clears it
    assert multiproc.prepare(tmp_path, "group-2") is False
    assert [p.name for p in tmp_path.glob("*.db")] == ["counter_222.db"]
    assert multiproc.prepare(tmp_path, "group-3") is True
    assert not list(tmp_path.glob("*.db"))


def _prepare(args):
    directory, group = args
    return multiproc.prepare(directory, group)


def test_multiprocess_directory_concurrent_processes_of_a_group_clear_once(tmp_path):
    _write_db(tmp_path, "counter_1.db")
    with multiprocessing.get_context("fork").Pool(4) as pool:
        cleared = pool.map(_prepare, [(tmp_path, "group-9")] * 8)
    assert sorted(cleared) == [False] * 7 + [True]


def test_multiprocess_mode_is_refused_where_prometheus_client_was_imported_too_early(tmp_path):
    import os

    import prometheus_client  # noqa: F401  (this test process imported it without the variable)

    assert multiproc.ENV not in os.environ
    with pytest.raises(RuntimeError, match="imported before"):
        multiproc.use(tmp_path)
    assert multiproc.ENV not in os.environ
