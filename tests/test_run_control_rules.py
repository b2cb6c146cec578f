"""The pure rules of pause, resume and retry-failed (crawlsched/planning/run_control.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from crawlsched.planning.run_control import (
    RETRYABLE,
    actions,
    display_state,
    end_event_id,
    moved_counts,
    pause_refusal,
    resume_refusal,
    retry_refusal,
)

STATES = ("planning", "running", "finished", "stopped")
runs = st.fixed_dictionaries(
    {"_id": st.just("s@20260101T000000Z"), "state": st.sampled_from(STATES)},
    optional={
        "planning": st.booleans(),
        "paused": st.booleans(),
        "stop_requested": st.booleans(),
        "announce": st.just("pending"),
        "parent_id": st.just("p@20260101T000000Z"),
        "children": st.integers(0, 3),
    },
)


@given(runs)
def test_only_open_runs_that_are_not_stopping_may_pause(run):
    open_run = run["state"] in ("planning", "running")
    assert (pause_refusal(run) is None) == (open_run and not run.get("stop_requested"))
    assert (resume_refusal(run) is None) == open_run


@given(runs)
def test_paused_shows_only_on_open_runs(run):
    shown = display_state(run)
    if run.get("paused") and run["state"] in ("planning", "running"):
        assert shown == "paused"
    else:
        assert shown == run["state"]


@given(runs)
def test_retry_takes_single_running_or_finished_runs_whose_end_is_announced(run):
    allowed = (
        run["state"] in ("running", "finished")
        and not run.get("planning")
        and not run.get("stop_requested")
        and not run.get("announce")
        and not run.get("parent_id")
        and not run.get("children")
    )
    assert (retry_refusal(run) is None) == allowed
    if not allowed:
        assert run["_id"] in retry_refusal(run)


@given(st.dictionaries(st.sampled_from(RETRYABLE), st.integers(0, 10_000)))
def test_a_retry_moves_counts_without_changing_the_run_total(taken):
    inc = moved_counts(taken)
    # Every page taken back leaves its outcome and becomes outstanding again: outcomes plus
    # outstanding (the pages the run still counts) are unchanged by the move.
    moved_off = sum(n for key, n in inc.items() if key.startswith("counts."))
    assert inc["outstanding"] == sum(taken.values()) == -moved_off
    assert all(n <= 0 for key, n in inc.items() if key.startswith("counts."))


@given(st.integers(1, 50), st.integers(1, 50))
def test_each_end_of_a_run_has_its_own_stable_id(a, b):
    assert end_event_id("r", "RunFinished", 1) == "r:RunFinished"  # as before retries existed
    assert (end_event_id("r", "RunFinished", a) == end_event_id("r", "RunFinished", b)) == (a == b)


def test_readable_cases():
    run = {"_id": "r", "state": "finished"}
    assert retry_refusal(run) is None
    assert "stopped" in retry_refusal({**run, "state": "stopped"})
    assert "announced" in retry_refusal({**run, "announce": "pending"})
    assert "has ended" in pause_refusal(run)
    assert moved_counts({"failed": 2, "exhausted": 1}) == {
        "counts.failed": -2,
        "counts.exhausted": -1,
        "outstanding": 3,
    }


outcome_counts = st.dictionaries(
    st.sampled_from(["succeeded", "failed", "exhausted", "expired", "starved"]),
    st.integers(0, 5),
)


@given(runs, outcome_counts)
def test_the_page_offers_exactly_the_commands_the_rules_accept(run, counts):
    offered = actions(run, counts)
    paused = display_state(run) == "paused"
    assert ("pause" in offered) == (not paused and pause_refusal(run) is None)
    assert ("resume" in offered) == (paused and resume_refusal(run) is None)
    failed = sum(counts.get(o, 0) for o in RETRYABLE)
    assert ("retry-failed" in offered) == (failed > 0 and retry_refusal(run) is None)
    assert not {"pause", "resume"} <= set(offered)  # never both
