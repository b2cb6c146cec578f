"""The command line's two backends answer alike: every operation it asks for is a route of the
OpenAPI document, and each read command's `--json` is the API's answer, whether the command
reads the store itself or goes through the API (a real uvicorn over the same store)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from crawlsched.cli import app, ops
from crawlsched.cli.remote import RemoteBackend
from tests.support.api import ApiServer
from tests.test_cli_contract import READS, RUN_ID, invoke, seeded  # noqa: F401  (a fixture)

# Each read command's answer as the API gives it: (route, query), and whether the command
# prints one document (else: a page's items, one per line, every page).
API_ANSWERS: dict[tuple[str, ...], tuple[str, dict[str, Any], bool]] = {
    ("runs",): ("/v1/runs", {"limit": 20}, False),
    ("run", "list"): ("/v1/runs", {"limit": 20}, False),
    ("run", "status"): (f"/v1/runs/{RUN_ID}", {}, True),
    ("run", "children"): (f"/v1/runs/{RUN_ID}/children", {"limit": 50}, False),
    ("run", "history"): ("/v1/history", {"schedule_id": "sweep-websites"}, False),
    ("run", "resources"): (f"/v1/runs/{RUN_ID}/resources", {}, False),
    ("schedules", "list"): ("/v1/schedules", {}, False),
    ("schedules", "show"): ("/v1/schedules/sweep-websites", {}, True),
    ("schedules", "next"): ("/v1/upcoming", {"limit": 50}, False),
    ("schedules", "missed"): ("/v1/missed-runs", {}, False),
    ("jobs", "problems"): ("/v1/problems", {}, False),
    ("jobs", "summary"): ("/v1/jobs", {}, False),
    ("jobs", "show"): ("/v1/jobs/websites/str:contract-job", {}, True),
    ("jobs", "list"): ("/v1/jobs/websites", {"limit": 50}, False),
    ("accounts", "list"): ("/v1/accounts", {}, False),
    ("nodes", "list"): ("/v1/nodes", {}, False),
    ("proxies", "list"): ("/v1/proxies", {}, False),
    ("proxies", "tiers"): ("/v1/proxies/tiers", {}, True),
    ("hosts", "list"): ("/v1/hosts", {}, False),
    ("hosts", "show"): ("/v1/hosts/lookup", {"host": "http://127.0.0.1:9"}, True),
    ("media", "list"): ("/v1/media", {}, False),
    ("media", "show"): ("/v1/media/web", {}, True),
    ("pools",): ("/v1/pools", {}, True),
    ("pools", "show"): ("/v1/pools", {}, True),
    ("activity",): ("/v1/activity", {"limit": 50}, False),
    ("stats",): ("/v1/stats", {}, True),
    ("store", "stats"): ("/v1/stats", {}, True),
    ("results",): ("/v1/results/article", {"limit": 50}, False),
    ("doctor",): ("/v1/doctor", {}, False),
    ("drivers",): ("/v1/drivers", {}, False),
    ("tokens", "list"): ("/v1/tokens", {}, False),
}


def test_every_operation_the_command_line_asks_for_is_a_route_of_the_openapi_document():
    from crawlsched.api import create_app
    from crawlsched.store.client import drop_embedded
    from tests.support.api import seeded_runtime

    paths = create_app(seeded_runtime("mongomock://ops-schema")).openapi()["paths"]
    drop_embedded("mongomock://ops-schema")
    missing = [
        f"{op.method} {op.path}"
        for op in ops.ALL.values()
        if op.method.lower() not in paths.get(op.path, {})
    ]
    assert missing == []
    assert len(ops.ALL) >= 60


def test_the_table_names_the_api_answer_of_every_read_command():
    assert set(API_ANSWERS) == set(READS)


@pytest.fixture
def api(seeded, monkeypatch) -> Iterator[ApiServer]:  # noqa: F811
    # The command here reads the environment; the server was given the tests' settings.
    monkeypatch.setenv("CRAWLSCHED_HOST_DELAY_S", "0")
    monkeypatch.setenv(
        "CRAWLSCHED_BROWSER_HOST_RESOLVER_RULES", seeded.settings.browser_host_resolver_rules
    )
    with ApiServer(seeded) as server:
        yield server


def api_answer(api: ApiServer, command: tuple[str, ...]) -> list[dict[str, Any]]:
    """What the API answers for the command: its document, or every item of its pages."""
    path, query, one = API_ANSWERS[command]
    if one:
        return [api.admin.get(path, params=query).raise_for_status().json()]
    page = api.admin.get(path, params=query).raise_for_status().json()
    items = list(page["items"])
    while page.get("next_offset") is not None and "limit" not in query:
        page = api.admin.get(path, params={**query, "offset": page["next_offset"]}).json()
        items += page["items"]
    return items


def through(api: ApiServer, *args: str) -> tuple[int, str, str]:
    backend = RemoteBackend(api.url, api.admin_token, "the test")
    result = CliRunner().invoke(app, list(args), obj={"backend": backend})
    return result.exit_code, result.stdout, result.stderr


def lines(out: str) -> list[dict[str, Any]]:
    import json

    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize("command", sorted(READS), ids=" ".join)
def test_a_read_command_s_json_is_the_api_s_answer_from_both_backends(api, command):
    args = [*READS[command], "--json"]
    code, here, err = invoke(*args)
    assert code == 0, err
    code, there, err = through(api, *args)
    assert code == 0, err
    answer = api_answer(api, command)
    assert lines(there) == answer
    assert lines(here) == answer


@pytest.mark.parametrize(
    "args",
    [
        ["run", "status", "nosuchrun"],
        ["schedules", "show", "nosuch"],
        ["jobs", "show", "websites", "str:nosuch"],
        ["hosts", "show", "http://nowhere.test:9"],
        ["hosts", "block", "nosuch"],
        ["media", "show", "nosuch"],
    ],
    ids=" ".join,
)
def test_an_error_is_the_same_one_line_and_exit_code_from_both_backends(api, args):
    here = invoke(*args)
    there = through(api, *args)
    assert here[0] == there[0] == 2
    assert here[2].strip() == there[2].strip() and here[2].startswith("error: ")


def test_a_table_is_the_same_from_both_backends(api, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    for args in (
        ["schedules", "list"],
        ["hosts", "list"],
        ["media", "list"],
        ["jobs", "list", "websites"],
        ["run", "status", RUN_ID],
        ["run", "history", "--run", RUN_ID],
    ):
        here, there = invoke(*args), through(api, *args)
        assert here[0] == there[0] == 0, (args, here, there)
        assert here[1] == there[1], args


def test_the_api_refuses_a_read_token_s_change_in_one_line(api):
    backend = RemoteBackend(api.url, api.read_token, "the test")
    result = CliRunner().invoke(
        app, ["schedules", "pause", "sweep-websites"], obj={"backend": backend}
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("error: this needs an admin token; yours is read")
    assert httpx.get(f"{api.url}/health").status_code == 200
