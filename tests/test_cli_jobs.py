"""`crawlsched jobs …` end to end on the embedded store: add, import, problems, summary."""

import json
import re
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from bson import ObjectId
from typer.testing import CliRunner, Result

from crawlsched.cli import app, jobs_import
from crawlsched.control import imports
from crawlsched.planning.problems import diagnose
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from crawlsched.store.client import drop_embedded
from crawlsched.store.jobs import MongoJobStore

Invoke = Callable[..., Result]


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Iterator[Invoke]:
    """Run `crawlsched …` against an embedded database of this test's own, after init-db."""
    url = f"mongomock://cli-jobs-{uuid.uuid4().hex}"
    # Tables as wide as their cells: these tests read cells (80 columns: test_cli_output).
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("CRAWLSCHED_MONGO_URL", url)
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(app, list(args))

    result = run("init-db")
    assert result.exit_code == 0, result.output
    yield run
    drop_embedded(url)


@pytest.fixture
def rt(invoke: Invoke) -> Runtime:
    """A runtime on the same embedded database the commands use."""
    return Runtime(Settings())


def words(result: Result) -> str:
    """The output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def table_value(result: Result, label: str) -> int:
    match = re.search(rf"{re.escape(label)}\s*│\s*(\d+)", result.output)
    assert match, f"no {label!r} row in:\n{result.output}"
    return int(match.group(1))


def table_rows(result: Result) -> list[list[str]]:
    """The body rows of every rich table in the output, as stripped cells."""
    return [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in result.output.splitlines()
        if line.startswith("│")
    ]


# -- add -----------------------------------------------------------------------------------------


def test_add_profile_creates_profile_and_publication_jobs(invoke: Invoke, rt: Runtime):
    before = datetime.now(UTC)

    result = invoke(
        "jobs", "add", "profile", "twitter", "@alice",
        "--validated", "--certitude", "0.9", "--interval", "3600",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert "twitter alice: profile, publication" in words(result)
    assert "2 new job(s)" in words(result)
    docs = sorted(rt.db.profiles.find({}), key=lambda d: d["task"])
    assert [d["task"] for d in docs] == ["profile", "publication"]
    for doc in docs:
        assert doc["target"] == "alice"
        assert doc["media_name_id"] == 1  # twitter in the packaged reference data
        assert (doc["state"], doc["enabled"], doc["attempt_count"]) == (1, True, 0)
        assert (doc["human_validation"], doc["certitude"], doc["interval_s"]) == (1, 0.9, 3600)
        assert before <= doc["execution_date"] <= datetime.now(UTC)
        assert doc["created_at"] == doc["modified_at"] == doc["execution_date"]
    assert rt.db.websites.count_documents({}) == 0


def test_add_profile_twice_skips_duplicates(invoke: Invoke, rt: Runtime):
    assert invoke("jobs", "add", "profile", "twitter", "alice").exit_code == 0

    again = invoke("jobs", "add", "profile", "twitter", "alice")
    more = invoke("jobs", "add", "profile", "twitter", "@alice", "--task", "friend", "--once")

    assert again.exit_code == more.exit_code == 0
    assert "0 new job(s)" in words(again)
    assert "2 already scheduled: skipped, not duplicated" in words(again)
    assert "1 new job(s)" in words(more)
    assert "1 already scheduled" in words(more)
    tasks = sorted(d["task"] for d in rt.db.profiles.find({"target": "alice"}))
    assert tasks == ["friend", "profile", "publication"]
    assert rt.db.profiles.find_one({"task": "friend"})["interval_s"] is None


def test_add_unknown_media_exits_2_listing_known_media(invoke: Invoke, rt: Runtime):
    result = invoke("jobs", "add", "profile", "myspace", "alice")

    assert result.exit_code == 2
    assert "unknown media 'myspace'; known media: instagram, tiktok, twitter, web, youtube" in (
        words(result)
    )
    assert rt.db.profiles.count_documents({}) == 0


def test_add_task_the_media_lacks_exits_2(invoke: Invoke, rt: Runtime):
    result = invoke("jobs", "add", "profile", "tiktok", "bob", "--task", "stories")

    assert result.exit_code == 2
    assert "media tiktok does not offer task(s) stories" in words(result)
    assert rt.db.profiles.count_documents({}) == 0


def test_add_website_uses_web_media_and_needs_a_url(invoke: Invoke, rt: Runtime):
    ok = invoke("jobs", "add", "website", "https://example.org/news", "--task", "comment")
    bad = invoke("jobs", "add", "website", "example.org")

    assert ok.exit_code == 0, ok.output
    assert bad.exit_code == 2
    assert "website target must be an http(s) URL" in words(bad)
    (doc,) = rt.db.websites.find({})
    assert (doc["target"], doc["task"], doc["media_name_id"]) == (
        "https://example.org/news",
        "comment",
        100,
    )


def test_add_interval_and_once_together_is_a_usage_error(invoke: Invoke, rt: Runtime):
    result = invoke("jobs", "add", "profile", "twitter", "a", "--once", "--interval", "60")

    assert result.exit_code == 2
    assert rt.db.profiles.count_documents({}) == 0


# -- import --------------------------------------------------------------------------------------


def test_import_mixed_files_counts_and_reasons(invoke: Invoke, rt: Runtime, tmp_path: Path):
    # Given alice already scheduled, a JSON-lines file and a CSV file, each with good and bad rows
    assert invoke("jobs", "add", "profile", "twitter", "alice").exit_code == 0
    jsonl = tmp_path / "jobs.jsonl"
    jsonl.write_text(
        '{"kind": "profile", "media": "twitter", "target": "bob"}\n'
        '{"kind": "website", "target": "https://example.org/a", "tasks": ["article", "comment"]}\n'
        '{"kind": "profile", "media": "myspace", "target": "carl"}\n'
        "{not json\n"
        '{"kind": "profile", "media": "tiktok", "target": "dave", "tasks": ["stories"]}\n'
        '{"kind": "profile", "media": "twitter", "target": "alice"}\n'
    )
    csv_file = tmp_path / "jobs.csv"
    csv_file.write_text(
        "kind,media,target,tasks,certitude\n"
        "profile,instagram,erin,profile;stories,0.8\n"
        "website,,not-a-url,,\n"
        "profile,twitter,fred,,7\n"
    )
    rejects = tmp_path / "rejects.jsonl"

    # When both are imported
    from_json = invoke("jobs", "import", str(jsonl), "--rejects", str(rejects))
    rejected_json = [json.loads(line) for line in rejects.read_text().splitlines()]
    from_csv = invoke("jobs", "import", str(csv_file))

    # Then good rows are inserted, duplicates skipped, bad rows reported with line and reason
    assert from_json.exit_code == 0, from_json.output
    assert [table_value(from_json, label) for label in (
        "rows read", "valid rows", "jobs inserted", "duplicates skipped", "rows rejected"
    )] == [6, 3, 4, 2, 3]  # fmt: skip
    assert [r["line"] for r in rejected_json] == [3, 4, 5]
    assert rejected_json[0]["reason"].startswith("unknown media 'myspace'; known media: instagram")
    assert rejected_json[1]["reason"].startswith("not valid JSON")
    assert rejected_json[2]["reason"].startswith("media tiktok does not offer task(s) stories")
    assert rejected_json[0]["row"] == {"kind": "profile", "media": "myspace", "target": "carl"}
    assert rejected_json[1]["row"] is None
    assert "media tiktok does not offer task(s) stories" in words(from_json)

    assert from_csv.exit_code == 0, from_csv.output
    assert table_value(from_csv, "jobs inserted") == 2
    assert table_value(from_csv, "rows rejected") == 2
    assert [row for row in table_rows(from_csv) if row[0].isdigit()] == [
        ["3", "website target must be an http(s) URL, got 'not-a-url'"],
        ["4", "certitude: Input should be less than or equal to 1"],
    ]

    assert sorted((d["target"], d["task"]) for d in rt.db.profiles.find({})) == [
        ("alice", "profile"), ("alice", "publication"),
        ("bob", "profile"), ("bob", "publication"),
        ("erin", "profile"), ("erin", "stories"),
    ]  # fmt: skip
    assert rt.db.profiles.find_one({"target": "erin"})["certitude"] == 0.8
    assert rt.db.websites.count_documents({"target": "https://example.org/a"}) == 2


def test_import_writes_in_chunks_and_caps_the_rejects_list(
    invoke: Invoke, rt: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Given small chunks, and a spy recording each bulk the real store writes
    monkeypatch.setattr(imports, "IMPORT_CHUNK", 3)
    bulks: list[int] = []
    real_insert_new = MongoJobStore.insert_new

    def spy(self: MongoJobStore, docs):
        bulks.append(len(docs))
        return real_insert_new(self, docs)

    monkeypatch.setattr(MongoJobStore, "insert_new", spy)
    path = tmp_path / "sites.ndjson"
    good = [{"kind": "website", "target": f"https://site{i}.org"} for i in range(8)]
    bad = [{"kind": "website", "target": f"nope{i}"} for i in range(jobs_import.SHOWN_REJECTS + 7)]
    path.write_text("".join(json.dumps(row) + "\n" for row in good + bad))

    result = invoke("jobs", "import", str(path))

    assert result.exit_code == 0, result.output
    assert bulks == [3, 3, 2]
    assert rt.db.websites.count_documents({}) == 8
    assert table_value(result, "rows rejected") == jobs_import.SHOWN_REJECTS + 7
    assert "… and 7 more rejected rows (--rejects FILE writes them all)" in words(result)
    assert "'nope49'" in words(result)
    assert "'nope50'" not in words(result)


def test_import_every_row_rejected_exits_1(invoke: Invoke, rt: Runtime, tmp_path: Path):
    path = tmp_path / "bad.csv"
    path.write_text("kind,target\nprofile,alice\nwebsite,x\n")

    result = invoke("jobs", "import", str(path))

    assert result.exit_code == 1
    assert table_value(result, "rows rejected") == 2
    assert "a profile needs a media" in words(result)


def test_import_kind_option_fills_rows_without_kind(invoke: Invoke, rt: Runtime, tmp_path: Path):
    path = tmp_path / "sites.csv"
    path.write_text("target\nhttps://a.org\n")

    result = invoke("jobs", "import", str(path), "--kind", "website")

    assert result.exit_code == 0, result.output
    assert rt.db.websites.count_documents({"target": "https://a.org", "task": "article"}) == 1


def test_import_unreadable_file_exits_2(invoke: Invoke, tmp_path: Path):
    wrong_type = tmp_path / "jobs.xlsx"
    wrong_type.write_text("x")

    missing = invoke("jobs", "import", str(tmp_path / "missing.jsonl"))
    unknown = invoke("jobs", "import", str(wrong_type))

    assert missing.exit_code == unknown.exit_code == 2
    assert "cannot read" in words(missing)
    assert "unknown extension" in words(unknown)


# -- problems, retry, summary --------------------------------------------------------------------


def test_problems_lists_set_aside_and_waiting_jobs(invoke: Invoke, rt: Runtime):
    # Given a job with an unknown media, set aside by the planner's audit
    now = rt.now()
    job_id = ObjectId()
    rt.db.profiles.insert_one(
        {"_id": job_id, "target": "ghost", "media_name": "myspace", "media_name_id": 999,
         "task": "profile", "state": 1,
         "enabled": True, "execution_date": now, "human_validation": 0, "certitude": 0.5,
         "modified_at": now, "attempt_count": 0}
    )  # fmt: skip
    store = rt.jobs("profiles")
    assert store.set_aside([p for p in map(diagnose, store.audit(now)) if p.set_aside], now) == 1
    # and a tiktok profile whose media an operator then disabled
    assert invoke("jobs", "add", "profile", "tiktok", "bob").exit_code == 0
    rt.reference.set_enabled("tiktok", False)

    as_json = invoke("jobs", "problems", "--json")
    as_table = invoke("jobs", "problems")

    assert as_json.exit_code == as_table.exit_code == 0
    rows = [json.loads(line) for line in as_json.output.splitlines()]
    assert sorted((r["target"], r["task"], r["reason"], r["status"]) for r in rows) == [
        ("bob", "profile", "media tiktok is disabled", "waiting"),
        ("bob", "publication", "media tiktok is disabled", "waiting"),
        ("ghost", "profile", "unknown media 'myspace'", "set aside"),
    ]
    assert {r["collection"] for r in rows} == {"profiles"}
    assert str(job_id) in {r["job_id"] for r in rows}
    text = words(as_table)
    assert "unknown media 'myspace'" in text and "media tiktok is disabled" in text
    assert "1 set aside" in text and "2 waiting on an operator" in text


def test_retry_problems_clears_set_aside_jobs(invoke: Invoke, rt: Runtime):
    now = rt.now()
    rt.db.websites.insert_one(
        {"target": "https://a.org", "media_name": "web", "media_name_id": 100,
         "task": "article", "state": 1,
         "enabled": True, "execution_date": "tomorrow", "modified_at": now}
    )  # fmt: skip
    store = rt.jobs("websites")
    store.set_aside([diagnose(r) for r in store.audit(now)], now)
    assert "execution_date is str" in words(invoke("jobs", "problems"))
    # The operator fixes the document.
    rt.db.websites.update_one({}, {"$set": {"execution_date": now}})

    result = invoke("jobs", "retry-problems")

    assert result.exit_code == 0
    assert "cleared 1 set-aside job(s) (profiles: 0, websites: 1)" in words(result)
    assert "problem" not in rt.db.websites.find_one({})
    assert "no problems" in words(invoke("jobs", "problems"))


def test_summary_counts_per_collection_and_state(invoke: Invoke, rt: Runtime):
    assert invoke("jobs", "add", "profile", "twitter", "alice", "-t", "friend").exit_code == 0
    assert invoke("jobs", "add", "website", "https://a.org").exit_code == 0
    rt.db.profiles.update_one({"task": "friend"}, {"$set": {"state": 4}})
    rt.db.profiles.update_one({"task": "profile"}, {"$set": {"state": 3}})

    result = invoke("jobs", "summary")

    assert result.exit_code == 0
    header = re.search(r"collection.*total", result.output).group(0)
    assert re.split(r"\s*┃\s*", header) == [
        "collection", "pending", "running", "failed", "done", "other", "total",
    ]  # fmt: skip
    cells = {row[0]: [int(c) for c in row[1:]] for row in table_rows(result)}
    assert cells == {"profiles": [0, 0, 1, 1, 0, 2], "websites": [1, 0, 0, 0, 0, 1]}


def test_import_that_loses_mongodb_half_way_reports_what_it_wrote(
    invoke: Invoke, rt: Runtime, tmp_path, monkeypatch: pytest.MonkeyPatch
):
    # Given 2,500 website rows (three bulk writes) and a server that goes away after the first
    from pymongo.errors import AutoReconnect

    path = tmp_path / "sites.jsonl"
    path.write_text(
        "".join(
            f'{{"kind": "website", "target": "https://s{i}.example.org/"}}\n' for i in range(2500)
        )
    )
    real_insert = MongoJobStore.insert_new
    calls = []

    def insert_then_lose(self, docs):
        calls.append(len(docs))
        if len(calls) > 1:
            raise AutoReconnect("connection closed")
        return real_insert(self, docs)

    monkeypatch.setattr(MongoJobStore, "insert_new", insert_then_lose)

    result = invoke("jobs", "import", str(path))

    # Then: exit 1, one error line naming MongoDB, the rows written before it, and what the
    # store holds of the write that got no answer (read back: none of it)
    assert result.exit_code == 1, result.output
    assert words(result).count("MongoDB did not answer a write of 1000 jobs") == 1
    assert table_value(result, "jobs inserted") == 1000
    assert "import stopped at row" in result.output
    assert "the last write (1000 jobs) got no answer: read back, the store holds 0" in words(result)
    assert rt.db.websites.count_documents({}) == 1000


@pytest.mark.parametrize("store_answers_after", [True, False])
def test_import_whose_write_got_no_answer_says_its_outcome_is_unknown(
    invoke: Invoke,
    rt: Runtime,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    store_answers_after: bool,
):
    # Given chunks of 3, and a store that applies the second write but never answers it
    import pymongo.errors

    monkeypatch.setattr(imports, "IMPORT_CHUNK", 3)
    real_insert_new = MongoJobStore.insert_new
    real_count_present = MongoJobStore.count_present
    writes: list[int] = []

    def applied_but_unanswered(self: MongoJobStore, docs):
        writes.append(len(docs))
        result = real_insert_new(self, docs)
        if len(writes) == 2:
            raise pymongo.errors.AutoReconnect("operation cancelled")
        return result

    def read_back(self: MongoJobStore, docs):
        if not store_answers_after:
            raise pymongo.errors.AutoReconnect("connection closed")
        return real_count_present(self, docs)

    monkeypatch.setattr(MongoJobStore, "insert_new", applied_but_unanswered)
    monkeypatch.setattr(MongoJobStore, "count_present", read_back)
    path = tmp_path / "sites.ndjson"
    rows = [{"kind": "website", "target": f"https://site{i}.org"} for i in range(8)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))

    # When it is imported
    result = invoke("jobs", "import", str(path))

    # Then it fails, says the outcome of that write is unknown and that a re-run is safe
    assert result.exit_code == 1
    said = words(result)
    assert "MongoDB did not answer a write of 3 jobs (AutoReconnect: operation cancelled)" in said
    assert "whether it was written is unknown" in said
    assert "Running the same import again is safe" in said
    assert table_value(result, "jobs inserted") == 3  # only the answered write is counted
    if store_answers_after:
        assert "the last write (3 jobs) got no answer: read back, the store holds 3 of them" in said
    else:
        assert "the last write (3 jobs) got no answer: its outcome is unknown" in said
    assert rt.db.websites.count_documents({}) == 6  # it was applied all the same

    # When the same import runs again on a store that answers
    monkeypatch.setattr(MongoJobStore, "insert_new", real_insert_new)
    again = invoke("jobs", "import", str(path))

    # Then what was written is skipped, the rest inserted: every job once
    assert again.exit_code == 0, again.output
    assert table_value(again, "jobs inserted") == 2
    assert table_value(again, "duplicates skipped") == 6
    assert rt.db.websites.count_documents({}) == 8


def test_store_load_whose_write_got_no_answer_says_its_outcome_is_unknown(
    invoke: Invoke, rt: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Given a dump of a store with jobs, loaded into a store that never answers a write
    import pymongo.errors

    from crawlsched.store import dump

    assert invoke("jobs", "add", "website", "https://a.org").exit_code == 0
    assert invoke("store", "dump", str(tmp_path / "dump")).exit_code == 0

    def unanswered(*args, **kwargs):
        raise pymongo.errors.NetworkTimeout("timed out")

    monkeypatch.setattr(dump, "load_dump", unanswered)
    result = invoke("store", "load", str(tmp_path / "dump"), "--drop")

    # Then: one error that says the outcome is unknown and how to load safely
    assert result.exit_code == 1
    said = words(result)
    assert "MongoDB did not answer a write of the load (NetworkTimeout: timed out)" in said
    assert "Load it again with --drop" in said
    assert "Traceback" not in result.output
