"""What the command line prints reads right: data as it is (no rich markup or emoji read out
of ids and URLs), unknown ids refused with exit 2, job states by name, and piped output within
80 columns."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from bson import ObjectId

from crawlsched.store.children import MongoChildStore
from tests.test_cli_contract import READS, RUN_ID, invoke, seeded  # noqa: F401  (seeded: a fixture)

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


def _stats(*args: str) -> dict:
    code, out, err = invoke("stats", "--json", *args)
    assert code == 0, err
    return json.loads(out)


def test_stats_name_job_states_and_count_markers_apart(seeded):  # noqa: F811
    # Given one done job, and a run that remembers a planned page it crawled (a seed marker)
    seeded.db.websites.insert_one({"_id": "done-job", "task": "article", "state": 4})
    before = _stats()
    ops = MongoChildStore(seeded.db, "websites").marker_ops(
        RUN_ID, [("article", "http://127.0.0.1:9/job")], seeded.now()
    )
    seeded.db.websites.bulk_write(ops)
    # When the stats are read
    stats = _stats()
    # Then states are named, every state present, and the marker is a page seen, not a job
    assert stats["jobs_by_state"]["websites"] == before["jobs_by_state"]["websites"]
    assert set(stats["jobs_by_state"]["profiles"]) == {
        "pending", "running", "failed", "done", "other"
    }  # fmt: skip
    assert stats["jobs_by_state"]["websites"]["done"] == 1
    assert stats["jobs_by_state"]["websites"]["pending"] >= 1
    assert (before["pages_seen"]["websites"], stats["pages_seen"]["websites"]) == (0, 1)
    code, table, _ = invoke("stats")
    assert code == 0 and "pending" in table and "done 1" in table
    assert '"4"' not in table and '"1"' not in table


def test_doctor_counts_jobs_not_markers(seeded):  # noqa: F811
    def websites() -> dict:
        code, out, err = invoke("doctor", "--json")
        assert code == 0, err
        return next(d for d in map(json.loads, out.splitlines()) if d["collection"] == "websites")

    before = websites()
    ops = MongoChildStore(seeded.db, "websites").marker_ops(
        RUN_ID, [("article", "http://127.0.0.1:9/job")], seeded.now()
    )
    seeded.db.websites.bulk_write(ops)
    after = websites()
    assert after["jobs"] == before["jobs"]
    assert (before["pages_seen"], after["pages_seen"]) == (0, 1)
    code, out, _ = invoke("doctor")
    assert code == 0 and f"websites: {after['jobs']} jobs" in out and "1 pages seen" in out


@pytest.mark.parametrize("command", sorted(READS), ids=" ".join)
def test_piped_output_fits_80_columns(seeded, monkeypatch, command):  # noqa: F811
    # Given a history row with long ids (the widest table), output not on a terminal
    monkeypatch.delenv("COLUMNS", raising=False)
    at = datetime(2026, 1, 2, tzinfo=UTC)
    seeded.history.add(
        [
            {
                "_id": ObjectId(),
                "schedule_id": "sweep-websites",
                "run_id": RUN_ID,
                "job_id": "str:child:70f06e0f7b0b4b1c9f0e8d7c6b5a4f3e",
                "outcome": "succeeded",
                "items_stored": 12,
                "account": "twitter:alice",
                "node": "http://127.0.0.1:4444",
                "started_at": at,
                "ended_at": at + timedelta(seconds=1),
            }
        ]
    )
    seeded.db.articles.insert_one(
        {"key": "http://127.0.0.1:9/" + "a" * 90, "run_id": RUN_ID, "first_seen": at,
         "last_seen": at}
    )  # fmt: skip
    code, out, err = invoke(*READS[command])
    assert code == 0, err
    assert out.strip()
    wide = [line for line in out.splitlines() if len(line) > 80]
    assert not wide, "\n".join(wide)
