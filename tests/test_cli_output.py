"""What the command line prints reads right: data as it is (no rich markup or emoji read out
of ids and URLs), unknown ids refused with exit 2, job states by name, and piped output within
80 columns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from bson import ObjectId

from tests.test_cli_contract import RUN_ID, invoke, seeded  # noqa: F401  (seeded: a fixture)

# `:child:` is an emoji code and `[red]x[/red]` markup to rich: both must print as they are.
TRICKY = "str:child:70f06[red]x[/red]"
TRICKY_URL = "http://127.0.0.1:9/:child:/[red]x[/red]"


def test_run_history_prints_a_job_id_as_it_is(seeded, monkeypatch):  # noqa: F811
    # Given a history row whose job id reads as an emoji code and as markup
    monkeypatch.setenv("COLUMNS", "300")
    at = datetime(2026, 1, 2, tzinfo=UTC)
    seeded.history.add(
        [
            {
                "_id": ObjectId(),
                "schedule_id": "sweep-websites",
                "run_id": RUN_ID,
                "job_id": TRICKY,
                "outcome": "succeeded",
                "started_at": at,
                "ended_at": at + timedelta(seconds=1),
            }
        ]
    )
    # When the history is printed as a table, then the id is there verbatim
    code, out, err = invoke("run", "history", "--schedule", "sweep-websites")
    assert code == 0, err
    assert TRICKY in out
    assert "\N{CHILD}" not in out


def test_results_print_a_url_as_it_is(seeded, monkeypatch):  # noqa: F811
    monkeypatch.setenv("COLUMNS", "300")
    seeded.db.articles.insert_one(
        {"key": TRICKY_URL, "run_id": RUN_ID, "last_seen": datetime(2026, 1, 2, tzinfo=UTC)}
    )
    code, out, err = invoke("results", "article", "--run", RUN_ID)
    assert code == 0, err
    assert TRICKY_URL in out
    assert "\N{CHILD}" not in out


def test_an_error_prints_the_id_it_names_as_it_is(seeded):  # noqa: F811
    code, _, err = invoke("schedules", "show", "[red]x[/red]:child:")
    assert code == 2
    assert err.startswith("error: ") and "[red]x[/red]:child:" in err


UNKNOWN_IDS = [
    ["results", "article", "--run", "nosuchrun"],
    ["results", "article", "--job", "str:nosuchjob"],
    ["run", "status", "nosuchrun"],
    ["run", "children", "nosuchrun"],
    ["run", "resources", "nosuchrun"],
    ["run", "stop", "nosuchrun"],
    ["run", "history", "--schedule", "nosuch"],
    ["run", "history", "--job", "str:nosuch"],
    ["schedules", "show", "nosuch"],
    ["schedules", "next", "nosuch"],
    ["schedules", "missed", "nosuch"],
    ["jobs", "show", "websites", "str:nosuch"],
    ["hosts", "show", "http://nosuch.example"],
    ["activity", "--run", "nosuchrun"],
]


@pytest.mark.parametrize("args", UNKNOWN_IDS, ids=" ".join)
@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_an_unknown_id_is_one_error_line_and_exit_2(seeded, args, as_json):  # noqa: F811
    extra = ["--json"] if as_json else []
    code, out, err = invoke(*args, *extra)
    assert code == 2, (out, err)
    assert out == ""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err


@pytest.mark.parametrize(
    "args",
    [
        ["results", "article", "--run", RUN_ID],
        ["results", "article", "--job", "str:contract-job"],
        ["activity", "--run", RUN_ID],
        ["schedules", "missed", "sweep-websites"],
    ],
    ids=" ".join,
)
def test_a_known_id_with_nothing_to_show_is_not_an_error(seeded, args):  # noqa: F811
    code, _, err = invoke(*args)
    assert code == 0, err
