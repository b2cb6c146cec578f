"""Reading a WebDriver /status answer: a Selenium Grid 4, a chromedriver, or something else."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.resources.node_status import CHROMEDRIVER, GRID, parse_status

URL = "http://127.0.0.1:4444"


def grid(nodes):
    return {"value": {"ready": True, "message": "Selenium Grid ready.", "nodes": nodes}}


slots = st.lists(st.booleans(), max_size=4)  # True: a slot holding a session


@given(st.lists(st.tuples(st.sampled_from(["UP", "DOWN", "DRAINING"]), slots), max_size=5))
def test_grid_capacity_counts_slots_of_up_nodes_only(nodes):
    payload = grid(
        [
            {"availability": a, "slots": [{"session": {"id": "s"} if busy else None} for busy in s]}
            for a, s in nodes
        ]
    )
    status = parse_status(URL, payload)
    assert status.kind == GRID and status.ready
    assert status.capacity == sum(len(s) for a, s in nodes if a == "UP")
    assert status.busy == sum(sum(s) for a, s in nodes if a == "UP")


def test_chromedriver_status_has_no_capacity():
    status = parse_status(URL, {"value": {"ready": False, "message": "busy", "build": {}}})
    assert (status.kind, status.ready, status.capacity) == (CHROMEDRIVER, False, None)


@pytest.mark.parametrize(
    "payload",
    [None, [], {"value": 3}, {"value": {}}, {"value": {"ready": "yes"}},
     {"value": {"ready": True, "nodes": {}}}, {"value": {"ready": True, "nodes": [{"slots": 3}]}}],
)  # fmt: skip
def test_anything_else_is_not_a_webdriver_endpoint(payload):
    with pytest.raises(ValueError, match=r"did not answer like a WebDriver endpoint"):
        parse_status(URL, payload)
