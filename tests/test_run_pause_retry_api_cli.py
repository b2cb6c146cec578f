"""pause, resume and retry-failed through the command line (one line, exit 2 for unknown ids
and refusals) and through the HTTP API (404, 409, 403 for a read token)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from tests.support.api import ApiServer
from tests.support.cli_store import Invoke, cli_on_fresh_store
from tests.support.waiting import wait_for
from tests.test_admission_flow import (
    run_waiting_for_an_account,
)
from tests.test_cli_run_ops import RUN, _seed, one_line


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Iterator[Invoke]:
    with cli_on_fresh_store(monkeypatch, "cli-pause") as (run, _):
        yield run


@pytest.mark.parametrize("command", ["pause", "resume", "retry-failed"])
def test_unknown_run_is_one_line_exit_2(invoke: Invoke, command: str):
    result = invoke("run", command, "no-such-run")
    assert result.exit_code == 2
    assert one_line(result) == "error: no run with id 'no-such-run'"


def test_pause_resume_and_refusals_on_the_command_line(invoke: Invoke):
    rt = Runtime(Settings())
    _seed(rt)  # a running parent with two running children
    family = [RUN, f"{RUN}/1", f"{RUN}/2"]

    paused = invoke("run", "pause", RUN, "--json")
    assert paused.exit_code == 0, paused.output
    assert json.loads(paused.stdout)["paused"] == family
    assert all(rt.runs.get(r)["paused"] for r in family)
    again = invoke("run", "pause", RUN)
    assert again.exit_code == 0 and "already paused: nothing changed" in one_line(again)

    # Shown as paused in `runs` and `run status`, piped within 80 columns
    for args in (("runs",), ("run", "status", RUN)):
        shown = invoke(*args)
        assert shown.exit_code == 0 and "paused" in shown.output, shown.output
        assert max(len(line) for line in shown.output.splitlines()) <= 80

    # A multi-process run cannot take its failed pages back: one line, exit 2, nothing changed
    before = list(rt.db.runs.find({}))
    refused = invoke("run", "retry-failed", RUN)
    assert refused.exit_code == 2 and "multi-process run" in one_line(refused)
    assert len(refused.output.strip().splitlines()) == 1
    assert list(rt.db.runs.find({})) == before

    resumed = invoke("run", "resume", RUN)
    assert resumed.exit_code == 0, resumed.output
    # Nothing was held back (no batch waited when it paused): the pages under way go on
    assert "no page was held back; 2 pages still to crawl" in one_line(resumed)
    assert not any(rt.runs.get(r).get("paused") for r in family)
    not_paused = invoke("run", "resume", RUN, "--json")
    assert json.loads(not_paused.stdout)["was_paused"] is False


def test_the_api_pauses_resumes_and_refuses(stub_pipeline):
    # Given no account: a run's 30 jobs wait for one
    rt, run_id = run_waiting_for_an_account(stub_pipeline)
    with ApiServer(rt, delivers=True) as api:
        for route in ("pause", "resume", "retry-failed"):
            assert api.admin.post(f"/v1/runs/no-such-run/{route}").status_code == 404
            assert api.reader.post(f"/v1/runs/{run_id}/{route}").status_code == 403
        paused = api.admin.post(f"/v1/runs/{run_id}/pause")
        assert paused.status_code == 200, paused.text
        assert paused.json()["paused"] == [run_id]
        assert api.admin.post(f"/v1/runs/{run_id}/pause").json()["already_paused"] is True
        assert api.reader.get(f"/v1/runs/{run_id}").json()["paused"] is True

        nothing = api.admin.post(f"/v1/runs/{run_id}/retry-failed")
        assert nothing.status_code == 409 and "no page that failed" in nothing.json()["detail"]

        resumed = api.admin.post(f"/v1/runs/{run_id}/resume")
        assert resumed.status_code == 200 and resumed.json()["was_paused"] is True
        # The run's pass plans what waited: the batches wait for an account again
        wait_for(lambda: sum(d["jobs"] for d in rt.waiting.all()) == 30, 30, "waiting again")
        assert "paused" not in api.reader.get(f"/v1/runs/{run_id}").json()

        assert api.admin.post(f"/v1/runs/{run_id}/stop").status_code == 200
        wait_for(lambda: rt.runs.get(run_id)["state"] == "stopped", 30, "the stopped end")
        for route in ("pause", "resume", "retry-failed"):
            ended = api.admin.post(f"/v1/runs/{run_id}/{route}")
            assert ended.status_code == 409, (route, ended.text)
