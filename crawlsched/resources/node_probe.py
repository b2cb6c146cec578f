"""Ask a Selenium node how it is: GET <url>/status, read by `node_status.parse_status`."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from crawlsched.errors import NodeUnreachable
from crawlsched.resources.node_status import NodeStatus, parse_status


def check_node_url(url: str) -> str:
    """A node URL as stored: http(s), a host, no credentials, no trailing slash."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"a node URL must be http(s)://host[:port][/path], got {url!r}")
    if parts.username or parts.password:
        raise ValueError("a node URL must not carry credentials")
    return url.rstrip("/")


def probe_node(url: str, client: httpx.Client) -> NodeStatus:
    """The node's status; NodeUnreachable (one line) when it cannot be read at all."""
    url = check_node_url(url)
    try:
        response = client.get(f"{url}/status")
    except httpx.HTTPError as e:
        raise NodeUnreachable(url, f"{type(e).__name__}: {e}") from None
    if response.status_code >= 400:
        raise NodeUnreachable(url, f"/status answered HTTP {response.status_code}")
    try:
        payload = response.json()
    except ValueError:
        raise ValueError(
            f"{url}/status did not answer like a WebDriver endpoint: not JSON"
        ) from None
    return parse_status(url, payload)
