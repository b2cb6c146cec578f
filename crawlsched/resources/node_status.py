"""Pure reading of a WebDriver `/status` answer: a Selenium Grid 4 or a plain chromedriver.

Grid (hub or standalone): `value.ready`, `value.nodes[*].availability` and `.slots[*].session`;
its capacity is the number of slots on nodes that are UP. A chromedriver has no `nodes`: it says
only whether it is ready, and its capacity is whatever the operator configures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GRID, CHROMEDRIVER = "grid", "chromedriver"


@dataclass(frozen=True)
class NodeStatus:
    kind: str
    ready: bool
    capacity: int | None  # None: not reported (a chromedriver); configure it
    busy: int
    message: str


def _not_webdriver(url: str, why: str) -> ValueError:
    return ValueError(f"{url}/status did not answer like a WebDriver endpoint: {why}")


def parse_status(url: str, payload: Any) -> NodeStatus:
    if not isinstance(payload, Mapping) or not isinstance(payload.get("value"), Mapping):
        raise _not_webdriver(url, "no JSON object with a 'value' object")
    value = payload["value"]
    ready = value.get("ready")
    if not isinstance(ready, bool):
        raise _not_webdriver(url, "'value.ready' is missing or not a boolean")
    message = str(value.get("message") or "")[:300]
    nodes = value.get("nodes")
    if nodes is None:
        return NodeStatus(CHROMEDRIVER, ready, None, 0, message)
    if not isinstance(nodes, list):
        raise _not_webdriver(url, "'value.nodes' is not a list")
    capacity = busy = 0
    for node in nodes:
        if not isinstance(node, Mapping) or not isinstance(node.get("slots", []), list):
            raise _not_webdriver(url, "a Grid node without a list of slots")
        if node.get("availability", "UP") != "UP":
            continue
        for slot in node.get("slots", []):
            capacity += 1
            busy += 1 if isinstance(slot, Mapping) and slot.get("session") else 0
    return NodeStatus(GRID, ready, capacity, busy, message)
