"""Probing a Selenium node over HTTP, on a scripted transport: what URL is asked, and how each
kind of answer (or no answer) reaches the operator. Real nodes are probed in
test_browser_nodes.py (browser marker); these run without a network."""

from __future__ import annotations

import httpx
import pytest

from crawlsched.errors import NodeUnreachable
from crawlsched.resources.node_probe import check_node_url, probe_node
from crawlsched.resources.node_status import CHROMEDRIVER, GRID, NodeStatus


@pytest.mark.parametrize(
    ("url", "stored"),
    [
        ("http://node-a:4444", "http://node-a:4444"),
        ("https://grid.example/wd/hub/", "https://grid.example/wd/hub"),
        ("http://10.0.0.5:9515//", "http://10.0.0.5:9515"),
        ("http://node-a", "http://node-a"),
        ("http://node-X/", "http://node-X"),  # only slashes go, not the letters before them
    ],
)
def test_node_url_is_stored_without_trailing_slash(url, stored):
    assert check_node_url(url) == stored


@pytest.mark.parametrize(
    "url", ["ftp://node-a", "node-a:4444", "http://", "http:///status", "", "file:///tmp/x"]
)
def test_node_url_must_be_http_with_a_host(url):
    with pytest.raises(ValueError, match=r"a node URL must be http\(s\)://host\[:port\]\[/path\]"):
        check_node_url(url)


@pytest.mark.parametrize("url", ["http://user:pw@node-a", "http://user@node-a", "https://:pw@n"])
def test_node_url_must_not_carry_credentials(url):
    # Stored URLs are shown in lists and logs: a password there would leak.
    with pytest.raises(ValueError, match=r"^a node URL must not carry credentials$"):
        check_node_url(url)


def client_answering(handler) -> tuple[httpx.Client, list[str]]:
    asked: list[str] = []

    def transport(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return handler(request)

    return httpx.Client(transport=httpx.MockTransport(transport)), asked


def test_probe_reads_the_status_of_the_url_as_stored():
    client, asked = client_answering(
        lambda r: httpx.Response(200, json={"value": {"ready": True, "message": "ok"}})
    )
    assert probe_node("http://node-a:9515/", client) == NodeStatus(
        CHROMEDRIVER, True, None, 0, "ok"
    )
    assert asked == ["http://node-a:9515/status"]


def test_probe_reads_a_grid():
    grid = {"value": {"ready": True, "message": "", "nodes": [{"slots": [{}, {"session": 1}]}]}}
    client, _ = client_answering(lambda r: httpx.Response(200, json=grid))
    assert probe_node("http://hub:4444", client) == NodeStatus(GRID, True, 2, 1, "")


@pytest.mark.parametrize(("code", "unreachable"), [(399, False), (400, True), (500, True)])
def test_probe_an_http_error_is_unreachable(code, unreachable):
    client, _ = client_answering(
        lambda r: httpx.Response(code, json={"value": {"ready": False, "message": "m"}})
    )
    if unreachable:
        with pytest.raises(NodeUnreachable) as refused:
            probe_node("http://node-a", client)
        assert refused.value.url == "http://node-a"
        assert refused.value.reason == f"/status answered HTTP {code}"
    else:
        assert probe_node("http://node-a", client).ready is False


def test_probe_a_connection_error_is_unreachable_in_one_line():
    def refuse(request):
        raise httpx.ConnectError("connection refused", request=request)

    client, _ = client_answering(refuse)
    with pytest.raises(NodeUnreachable) as refused:
        probe_node("http://node-a/", client)
    assert refused.value.url == "http://node-a"
    assert refused.value.reason == "ConnectError: connection refused"
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


def test_probe_an_answer_that_is_not_json_is_not_a_webdriver():
    client, _ = client_answering(lambda r: httpx.Response(200, text="<html>hello</html>"))
    with pytest.raises(ValueError) as refused:
        probe_node("http://node-a", client)
    assert not isinstance(refused.value, NodeUnreachable)
    assert (
        str(refused.value)
        == "http://node-a/status did not answer like a WebDriver endpoint: not JSON"
    )
    assert refused.value.__suppress_context__


def test_probe_an_answer_in_json_that_is_not_a_webdriver_names_the_url():
    client, _ = client_answering(lambda r: httpx.Response(200, json={"hello": "world"}))
    with pytest.raises(ValueError) as refused:
        probe_node("http://node-a/", client)
    assert str(refused.value).startswith(
        "http://node-a/status did not answer like a WebDriver endpoint: no JSON object"
    )


def test_probe_refuses_a_bad_url_before_asking():
    client, asked = client_answering(lambda r: httpx.Response(200, json={}))
    with pytest.raises(ValueError, match="credentials"):
        probe_node("http://u:p@node-a", client)
    assert asked == []
