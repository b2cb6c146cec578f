"""The command line's contract: `--version`; `--json` on every read command, parsing, with ISO
8601 dates; every error one line on stderr with its documented exit code (0 ok, 1 failed or a
service unreachable, 2 usage or bad input), with or without `--json`."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from bson import ObjectId
from typer.testing import CliRunner

from crawlsched import __version__
from crawlsched.cli import run
from crawlsched.reference import load_reference
from crawlsched.resources.rules import AccountLimits
from crawlsched.runtime import Runtime
from tests.conftest import settings_for_tests

RUN_ID = "sweep-websites@20260101T000000Z"
# Every read command, with the arguments it needs on the seeded store.
READS = {
    ("runs",): ["runs"],
    ("run", "list"): ["run", "list"],
    ("run", "status"): ["run", "status", RUN_ID],
    ("run", "children"): ["run", "children", RUN_ID],
    ("run", "history"): ["run", "history", "--schedule", "sweep-websites"],
    ("run", "resources"): ["run", "resources", RUN_ID],
    ("schedules", "list"): ["schedules", "list"],
    ("schedules", "show"): ["schedules", "show", "sweep-websites"],
    ("schedules", "next"): ["schedules", "next"],
    ("schedules", "missed"): ["schedules", "missed"],
    ("jobs", "problems"): ["jobs", "problems"],
    ("jobs", "summary"): ["jobs", "summary"],
    ("jobs", "show"): ["jobs", "show", "websites", "str:contract-job"],
    ("jobs", "list"): ["jobs", "list", "websites"],
    ("accounts", "list"): ["accounts", "list"],
    ("nodes", "list"): ["nodes", "list"],
    ("proxies", "list"): ["proxies", "list"],
    ("proxies", "tiers"): ["proxies", "tiers"],
    ("hosts", "list"): ["hosts", "list"],
    ("hosts", "show"): ["hosts", "show", "http://127.0.0.1:9"],
    ("media", "list"): ["media", "list"],
    ("media", "show"): ["media", "show", "web"],
    ("pools",): ["pools"],
    ("activity",): ["activity"],
    ("stats",): ["stats"],
    ("store", "stats"): ["store", "stats"],
    ("pools", "show"): ["pools", "show"],
    ("results",): ["results", "article"],
    ("doctor",): ["doctor"],
    ("drivers",): ["drivers"],
    ("tokens", "list"): ["tokens", "list"],
}
# A date written any other way than ISO 8601 (str() of a datetime has a space).
NOT_ISO = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}")
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")


def invoke(*args: str) -> tuple[int, str, str]:
    with CliRunner().isolation() as (out, err, _):
        code = run(list(args))
        sys.stdout.flush()
        sys.stderr.flush()
        return code, out.getvalue().decode(), err.getvalue().decode()


@pytest.fixture
def seeded(embedded_mongo_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    settings = settings_for_tests(mongo_url=embedded_mongo_url, broker_url="stub://")
    for name, value in {
        "CRAWLSCHED_MONGO_URL": embedded_mongo_url,
        "CRAWLSCHED_SECRET_KEY": settings.secret_key.get_secret_value(),
        "CRAWLSCHED_TARGET_ALLOW_NETWORKS": '["127.0.0.1/32"]',
    }.items():
        monkeypatch.setenv(name, value)
    rt = Runtime(settings)
    rt.create_indexes()
    rt.reference.load(load_reference())
    rt.schedules.ensure_defaults(rt.now())
    fire_at = datetime(2026, 1, 1, tzinfo=UTC)
    rt.runs.open(RUN_ID, "sweep-websites", fire_at, fire_at)
    rt.history.add(
        [
            {
                "_id": ObjectId(),
                "schedule_id": "sweep-websites",
                "run_id": RUN_ID,
                "job_id": "oid:6b05df31ea893d02f0cd555e",
                "outcome": "succeeded",
                "started_at": fire_at,
                "ended_at": fire_at + timedelta(seconds=2),
            }
        ]
    )
    rt.missed_runs.record(rt.schedules.get("sweep-websites"), [(fire_at, "paused")], rt.now())
    rt.inventory.add_account("twitter", "alice", "pw", AccountLimits(), rt.now())
    rt.tokens.create("read", "contract", rt.now())
    rt.inventory.add_node("http://127.0.0.1:4444", "chromedriver", 2, rt.now())
    rt.proxies.add_proxy("dc-1", "http://127.0.0.1:3128", rt.now(), username="u", password="p")
    rt.proxies.record_tier("twitter", None, 0, True, rt.now())
    rt.hosts.acquire("http://127.0.0.1:9", "vm:1", rt.host_policy, rt.now(), 10.0)
    rt.hosts.block("http://127.0.0.1:9", rt.now() + timedelta(hours=1), "HTTP 429", rt.now())
    assert invoke("jobs", "add", "website", "http://127.0.0.1:9/")[0] == 0
    rt.db.websites.insert_one(
        {"_id": "contract-job", "target": "http://127.0.0.1:9/job", "media_name_id": 100,
         "task": "article", "state": 1, "interval_s": 3600, "execution_date": fire_at}
    )  # fmt: skip
    assert (
        invoke("schedules", "add", "hourly", "--every", "3600", "--collection", "websites")[0] == 0
    )
    yield rt


def test_version():
    code, out, _ = invoke("--version")
    assert (code, out.strip()) == (0, f"crawlsched {__version__}")


# Commands with `--json` that change something (their JSON is the API's answer to the change).
CHANGES_WITH_JSON = {
    ("run", "now"), ("run", "stop"), ("run", "pause"), ("run", "resume"),
    ("run", "retry-failed"), ("run", "correct"), ("run", "watch"), ("tokens", "create"),
    ("jobs", "add", "profile"), ("jobs", "add", "website"),
    *(("schedules", verb) for verb in ("add", "update", "pause", "unpause", "stop", "delete")),
}  # fmt: skip


def json_commands() -> set[tuple[str, ...]]:
    """Every command (a group's own callback too) that takes `--json`."""
    import typer

    from crawlsched.cli import app

    found: set[tuple[str, ...]] = set()

    def walk(command, path: tuple[str, ...]) -> None:
        if any("--json" in getattr(p, "opts", ()) for p in command.params):
            found.add(path)
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


def test_the_table_covers_every_read_command():
    assert json_commands() - CHANGES_WITH_JSON == set(READS)


def _dates_are_iso(value) -> int:
    """How many dates `value` holds; fails on one not in ISO 8601."""
    if isinstance(value, dict):
        return sum(_dates_are_iso(v) for v in value.values())
    if isinstance(value, list):
        return sum(_dates_are_iso(v) for v in value)
    if isinstance(value, str):
        assert not NOT_ISO.search(value), value
        if ISO.match(value):
            assert datetime.fromisoformat(value).tzinfo is not None, value
            return 1
    return 0


@pytest.mark.parametrize("command", sorted(READS), ids=" ".join)
def test_every_read_command_has_json_with_iso_dates(seeded, command):
    code, out, err = invoke(*READS[command], "--json")
    assert code == 0, err
    docs = [json.loads(line) for line in out.splitlines()]
    # Commands with nothing to list print nothing; these have something on the seeded store.
    if command not in {
        ("jobs", "problems"),
        ("results",),
        ("run", "children"),
        ("run", "resources"),
    }:
        assert docs, f"{command}: no JSON output"
    assert all(isinstance(d, dict) for d in docs)
    dates = sum(_dates_are_iso(d) for d in docs)
    if command in {("runs",), ("run", "status"), ("schedules", "list"), ("activity",)}:
        assert dates > 0, f"{command} shows no date"


ERRORS = [
    # (arguments, exit code): a usage error and a bad input or unknown name per group.
    (["schedules", "add"], 2),
    (["schedules", "show", "nope", "--json"], 2),
    (["schedules", "add", "x", "--cron", "not cron", "--collection", "websites"], 2),
    (["run", "status", "nope", "--json"], 2),
    (["run", "now"], 2),
    (["jobs", "add", "website", "ftp://x"], 2),
    (["jobs", "summary", "--bogus"], 2),
    (["accounts", "add", "myspace", "bob", "--secret-env", "NOPE_UNSET"], 2),
    (["nodes", "drain", "http://127.0.0.1:1/nope"], 2),
    (["results", "nothing"], 2),
    (["tokens", "revoke", "nope"], 2),
    (["tokens", "create", "--name", "x", "--role", "root"], 2),
    (["store", "load", "/nonexistent-folder"], 2),
    (["nope"], 2),
]


@pytest.mark.parametrize(
    ("args", "code"), ERRORS, ids=lambda v: " ".join(v) if isinstance(v, list) else str(v)
)
def test_errors_are_one_line_with_their_exit_code(seeded, args, code):
    got, out, err = invoke(*args)
    assert got == code, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err


@pytest.mark.parametrize(
    "args", [["schedules", "list", "--json"], ["runs"], ["stats", "--json"], ["jobs", "summary"]]
)
def test_an_unreachable_store_exits_1_in_one_line(monkeypatch, args):
    monkeypatch.setenv("CRAWLSCHED_MONGO_URL", "mongodb://127.0.0.1:1")
    monkeypatch.setenv("CRAWLSCHED_CONNECT_TIMEOUT_S", "0.5")
    code, _, err = invoke(*args)
    assert code == 1
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "MongoDB unreachable" in lines[0], err


OLD_SPELLINGS = [
    (["runs"], ["run", "list"]),
    (["stats"], ["store", "stats"]),
    (["pools"], ["pools", "show"]),
    (["sweep-now", "sweep-websites"], ["schedules", "fire", "sweep-websites"]),
]


@pytest.mark.parametrize(("old", "new"), OLD_SPELLINGS, ids=" ".join)
def test_an_old_spelling_does_what_its_noun_group_command_does(seeded, old, new):
    assert invoke(*old) == invoke(*new)
    code, out, _ = invoke(*new)
    assert code == 0 and out.strip()


def test_old_spellings_are_hidden_from_the_help():
    code, out, _ = invoke("--help")
    assert code == 0
    listed = {line.split()[1] for line in out.splitlines() if line.startswith("│ ")}
    assert {"run", "store", "pools", "schedules"} <= listed
    assert not {"runs", "stats", "sweep-now"} & listed
