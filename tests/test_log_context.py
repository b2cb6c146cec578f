"""Log lines of an actor carry run_id, dispatch_id, schedule_id, actor and message_id."""

from __future__ import annotations

import io
import json
import sys

from hypothesis import given
from hypothesis import strategies as st

from crawlsched.brokers.middleware import message_context
from crawlsched.demo.site import DemoSite
from crawlsched.runtime import get_runtime
from tests.support.seeding import fire_all_now, seed
from tests.support.waiting import wait_for


def test_log_lines_are_bound_to_the_message_they_belong_to(stub_pipeline, monkeypatch):
    # Logging binds to the sys.stderr of the moment it is configured (by the pipeline's broker
    # set-up): give it a stream of our own. Through pytest's capfd the start of the output was
    # lost about one run in ten, the tick's line with it.
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    stub_pipeline(threads=2)
    from crawlsched.actors import ticker

    rt = get_runtime()
    with DemoSite() as site:
        seed(rt, site.base_url, node_url=None)
        fire_all_now(rt)
        ticker.tick.send()
        wait_for(rt.runs.recent, 30, "a run to open")
        wait_for(lambda: all(not r["planning"] for r in rt.runs.recent(2)), 30, "planning")
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line[:1] == "{"]
    by_event = {}
    for line in lines:
        by_event.setdefault(line["event"], line)
    # The planner's lines name the schedule, though plan_crawls takes it as a plain argument
    planned = by_event["run_planned"]
    assert planned["actor"] == "plan_crawls" and planned["message_id"]
    assert planned["schedule_id"] == planned["run_id"].rpartition("@")[0]
    # A tick's lines name the actor and the message
    fired = by_event["schedule_fired"]
    assert fired["actor"] == "tick" and fired["message_id"]


@given(
    run_id=st.text(min_size=1, max_size=30),
    dispatch_id=st.text(max_size=30),
    noise=st.dictionaries(st.text(max_size=10), st.integers(), max_size=4),
)
def test_message_context_takes_only_known_short_string_keys(run_id, dispatch_id, noise):
    payload = {**noise, "run_id": run_id, "dispatch_id": dispatch_id, "secret": "x"}
    context = message_context((), (payload,), {})
    assert set(context) <= {"run_id", "dispatch_id", "schedule_id"}
    assert context["run_id"] == run_id and context["dispatch_id"] == dispatch_id
    if "@" in run_id:
        assert context["schedule_id"] == run_id.rpartition("@")[0]


def test_message_context_names_positional_arguments_and_ignores_long_values():
    context = message_context(("schedule_id", "fire_at"), ("sweep-profiles", "2026"), {})
    assert context == {"schedule_id": "sweep-profiles"}
    assert message_context(("run_id",), ("x" * 201,), {}) == {}
