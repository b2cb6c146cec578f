"""A sweep firing with nothing due makes a run that planned nothing, every few minutes: such
runs are left out of `crawlsched runs`, `GET /v1/runs` and the status page unless asked for
(`--all`, `?empty=true`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from tests.support.api import ApiServer, seeded_runtime
from tests.support.cli_store import cli_on_fresh_store

T0 = datetime(2026, 11, 25, 8, 0, tzinfo=UTC)
BUSY = "sweep-profiles@20261125T080000Z"  # planned 3
PARENT = "sweep-profiles@20261125T081000Z"  # planned nothing itself, two child runs
PLANNING = "sweep-profiles@20261125T082000Z"  # still planning
EMPTY = [f"sweep-websites@20261125T08{m:02d}00Z" for m in (5, 15, 25)]  # nothing due


def _seed(rt: Runtime) -> None:
    def run(run_id: str, minutes: int, planned: int | None, **close) -> None:
        at = T0 + timedelta(minutes=minutes)
        rt.runs.open(run_id, run_id.partition("@")[0], at, at)
        if planned is not None:
            rt.runs.close_planning(run_id, planned, {}, at, **close)

    run(BUSY, 0, 3)
    run(PARENT, 10, 0, children=2)
    run(PLANNING, 20, None)
    for n, run_id in enumerate(EMPTY):
        run(run_id, 5 + 10 * n, 0)
        rt.runs.finish(run_id, T0 + timedelta(minutes=6 + 10 * n))


SHOWN = [PLANNING, PARENT, BUSY]  # newest first
EVERY = [EMPTY[2], PLANNING, EMPTY[1], PARENT, EMPTY[0], BUSY]


def test_run_store_leaves_out_runs_that_planned_nothing_when_asked(embedded_mongo_url):
    rt = seeded_runtime(embedded_mongo_url)
    _seed(rt)
    assert [r["_id"] for r in rt.runs.recent(20, empty=False)] == SHOWN
    assert [r["_id"] for r in rt.runs.recent(20)] == EVERY
    assert [r["_id"] for r in rt.runs.page(2, 1, empty=False)] == SHOWN[1:]
    finished = rt.runs.page(20, state=rt.runs.get(EMPTY[0])["state"], empty=False)
    assert EMPTY[0] not in [r["_id"] for r in finished]


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Iterator:
    with cli_on_fresh_store(monkeypatch, "cli-empty-runs") as (cli, _):

        def run(*args: str) -> str:
            result = cli(*args)
            assert result.exit_code == 0, result.output
            return result.stdout

        _seed(Runtime(Settings()))
        yield run


def _ids(output: str) -> list[str]:
    return [json.loads(line)["_id"] for line in output.splitlines()]


def test_cli_runs_hides_empty_runs_unless_all(invoke):
    assert _ids(invoke("runs", "--json")) == SHOWN
    assert _ids(invoke("runs", "--json", "--all")) == EVERY
    assert _ids(invoke("runs", "--json", "--limit", "2")) == SHOWN[:2]
    table = invoke("runs")
    assert "sweep-websites" not in table and "sweep-profiles" in table


def test_api_runs_and_status_hide_empty_runs_unless_asked(embedded_mongo_url):
    with ApiServer(seeded_runtime(embedded_mongo_url)) as api:
        _seed(api.runtime)

        def listed(path: str, **params) -> list[str]:
            response = api.reader.get(path, params=params)
            assert response.status_code == 200, response.text
            body = response.json()
            return [r.get("_id") or r.get("run_id") for r in body.get("items", body.get("runs"))]

        assert listed("/v1/runs") == SHOWN
        assert listed("/v1/runs", empty="true") == EVERY
        assert listed("/v1/runs", empty="false", schedule_id="sweep-websites") == []
        assert listed("/v1/status") == SHOWN
        assert listed("/v1/status", empty="true") == EVERY
