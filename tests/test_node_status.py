"""Reading a WebDriver /status answer: a Selenium Grid 4, a chromedriver, or something else."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.resources.node_status import CHROMEDRIVER, GRID, NodeStatus, parse_status

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


def test_status_keeps_readiness_and_message_of_either_kind():
    chromedriver = parse_status(URL, {"value": {"ready": True, "message": "ChromeDriver ready"}})
    assert chromedriver == NodeStatus(CHROMEDRIVER, True, None, 0, "ChromeDriver ready")
    down = parse_status(URL, {"value": {"ready": False, "message": "no nodes", "nodes": []}})
    assert down == NodeStatus(GRID, False, 0, 0, "no nodes")


@pytest.mark.parametrize(
    ("message", "kept"),
    [(None, ""), ("", ""), (7, "7"), ("x" * 301, "x" * 300), ("y" * 300, "y" * 300)],
)
def test_status_message_is_text_of_at_most_300_characters(message, kept):
    # The message is shown to an operator and stored with the node: never None, never a wall.
    assert parse_status(URL, {"value": {"ready": True, "message": message}}).message == kept


def test_grid_node_without_availability_or_slots_field_is_up_and_empty():
    # A Grid node that omits `availability` is counted as up; one without `slots` has none.
    payload = grid([{"slots": [{"session": None}, {"session": {"id": "s"}}]}, {}])
    status = parse_status(URL, payload)
    assert (status.capacity, status.busy) == (2, 1)


@pytest.mark.parametrize(
    ("slot", "busy"), [({"session": None}, 0), ({}, 0), (None, 0), ("odd", 0), ({"session": 1}, 1)]
)
def test_only_a_slot_holding_a_session_is_busy(slot, busy):
    status = parse_status(URL, grid([{"availability": "UP", "slots": [slot]}]))
    assert (status.capacity, status.busy) == (1, busy)


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (None, "no JSON object with a 'value' object"),
        ({"value": []}, "no JSON object with a 'value' object"),
        ({"value": {"ready": 1}}, "'value.ready' is missing or not a boolean"),
        ({"value": {"ready": True, "nodes": "n"}}, "'value.nodes' is not a list"),
        ({"value": {"ready": True, "nodes": ["n"]}}, "a Grid node without a list of slots"),
        ({"value": {"ready": True, "nodes": [{"slots": {}}]}}, "a Grid node without a list of"),
    ],
)
def test_not_a_webdriver_endpoint_says_where_and_why(payload, why):
    # The operator adding a node reads this line: it names the URL and what was wrong.
    with pytest.raises(ValueError) as refused:
        parse_status(URL, payload)
    assert str(refused.value).startswith(
        f"{URL}/status did not answer like a WebDriver endpoint: {why}"
    )
