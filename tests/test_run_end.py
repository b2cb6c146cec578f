"""Pure rules: how a run ended, and the routing key of an event."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.events import routing_key
from crawlsched.planning.outcomes import STOPPED, Outcome
from crawlsched.planning.run_end import FAILURES, RunEnd, run_end

LABELS = [
    Outcome.SUCCEEDED,
    Outcome.FAILED,
    Outcome.EXHAUSTED,
    Outcome.EXPIRED,
    Outcome.STARVED,
    STOPPED,
]
counts = st.dictionaries(st.sampled_from(LABELS), st.integers(0, 10_000))


@given(counts, st.booleans())
def test_run_end_stopped_wins_then_incomplete_then_failed_only_when_nothing_succeeded(
    counts, stopped
):
    end = run_end(counts, stopped)
    failures = sum(counts.get(o, 0) for o in FAILURES)
    if stopped:
        assert (end.state, end.result, end.event) == ("stopped", "stopped", "RunStopped")
    elif counts.get(Outcome.EXPIRED, 0) > 0:
        # A page the machinery gave up: the run did not see every page, whatever else.
        assert (end.state, end.result, end.event) == ("finished", "incomplete", "RunIncomplete")
    elif failures and not counts.get(Outcome.SUCCEEDED):
        assert (end.state, end.result, end.event) == ("finished", "failed", "RunFailed")
    else:
        assert (end.state, end.result, end.event) == ("finished", "succeeded", "RunFinished")


@pytest.mark.parametrize(
    ("counts", "event"),
    [
        ({}, "RunFinished"),  # nothing was due: a run that did its job
        ({"starved": 4}, "RunFinished"),  # starved is not a failure
        ({"failed": 1, "succeeded": 1}, "RunFinished"),
        ({"expired": 2}, "RunIncomplete"),
        ({"expired": 1, "succeeded": 40}, "RunIncomplete"),
        # Pages that failed on their own, or were cut by a bound, leave it succeeded.
        ({"exhausted": 3, "succeeded": 40}, "RunFinished"),
        ({"exhausted": 1, "stopped": 3}, "RunFailed"),
        ({"failed": 1, "succeeded": 0}, "RunFailed"),
        # A damaged count below zero counts as none, on either side.
        ({"failed": -3}, "RunFinished"),
        ({"failed": -1, "expired": 1}, "RunIncomplete"),
        ({"failed": 1, "expired": -1}, "RunFailed"),
        ({"succeeded": -1, "failed": 1}, "RunFailed"),
    ],
)
def test_run_end_table(counts, event):
    assert run_end(counts, False).event == event
    assert run_end(counts, True) == RunEnd("stopped", "stopped", "RunStopped")


words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)


@given(st.lists(words, min_size=2, max_size=4))
def test_routing_key_is_subject_then_what_happened(parts):
    name = "".join(p.capitalize() for p in parts)
    assert routing_key(name) == f"{parts[0]}.{'_'.join(parts[1:])}"


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("RunFinished", "run.finished"),
        ("ScheduleUnpaused", "schedule.unpaused"),
        ("LeaseGrantFailed", "lease.grant_failed"),
    ],
)
def test_routing_key_table(name, key):
    assert routing_key(name) == key


@pytest.mark.parametrize("bad", ["", "run_finished", "runFinished", "Run Finished", "Run.Done"])
def test_routing_key_refuses_names_that_are_not_camel_case(bad):
    with pytest.raises(ValueError, match="CamelCase"):
        routing_key(bad)


@given(st.text(min_size=1, max_size=20), st.integers(1, 64))
def test_child_run_ids_name_their_parent(schedule, shard):
    from datetime import UTC, datetime

    from crawlsched.planning.run_names import (
        child_run_id,
        parent_run_id,
        run_id_for,
        schedule_id_of,
    )

    parent = run_id_for(schedule.replace("@", "-"), datetime(2026, 11, 23, tzinfo=UTC))
    child = child_run_id(parent, shard)
    assert parent_run_id(child) == parent
    assert parent_run_id(parent) is None
    assert schedule_id_of(child) == schedule_id_of(parent) == schedule.replace("@", "-")


@pytest.mark.parametrize(
    ("notify", "word", "url"),
    [
        ({"webhook": "http://127.0.0.1:8/h"}, "finished", "http://127.0.0.1:8/h"),
        ({"webhook": "https://example.org/h"}, "failed", "https://example.org/h"),
        ({"webhook": "https://example.org/h"}, "stopped", None),  # not asked for by default
        (
            {"webhook": "https://example.org/h", "on": ["stopped"]},
            "stopped",
            "https://example.org/h",
        ),
        ({"webhook": "ftp://example.org/h"}, "finished", None),
        ({"webhook": "http://[::1"}, "finished", None),  # not a URL
        ({"webhook": 42}, "finished", None),
        ({"webhook": "https://example.org/h", "on": "finished"}, "finished", None),
        ("https://example.org/h", "finished", None),
    ],
)
def test_webhook_of_reads_only_a_well_formed_notify_field(notify, word, url):
    from crawlsched.flow.notifying import webhook_of

    # A webhook stored in the clear (by an earlier version) comes out to be sealed.
    found = webhook_of({"_id": "s", "notify": notify}, word)
    assert (None if found is None else found["plain"]) == url
    assert webhook_of(None, word) is None


def test_webhook_of_hands_on_a_sealed_webhook_as_it_is():
    from crawlsched.flow.notifying import webhook_of

    sealed = {"secret": "gAAAA-ciphertext", "shown": "https://example.org"}
    assert webhook_of({"_id": "s", "notify": {"webhook": sealed}}, "failed") == sealed
    assert webhook_of({"_id": "s", "notify": {"webhook": {"shown": "x"}}}, "failed") is None


@pytest.mark.parametrize(
    ("on", "result", "told"),
    [
        (["failed"], "incomplete", True),  # asked before runs could end incomplete
        (["failed"], "failed", True),
        (["failed"], "succeeded", False),
        (["finished"], "incomplete", False),
        (["incomplete"], "incomplete", True),
        (["finished", "failed"], "stopped", False),
    ],
)
def test_a_schedule_notified_of_failures_hears_of_an_incomplete_end(on, result, told):
    from crawlsched.flow.notifying import notify_of

    schedule = {"notify": {"webhook": "https://hooks.example/x", "on": on}}
    assert (notify_of(schedule, result) is not None) == told
