"""Turning operator input into job documents, and reading import files without ever raising."""

import contextlib
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlsched.catalog import PROFILE, TARGET_KINDS, WEBSITE
from crawlsched.errors import BadJobInput
from crawlsched.import_files import parse_import_file
from crawlsched.jobs_input import (
    DEFAULT_INTERVAL_S,
    MIN_TASKS,
    JobInput,
    build_job_docs,
    job_input_from_row,
)

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
TWITTER = {"_id": 1, "media_name": "twitter"}
TWITTER_TASKS = {"profile", "publication", "friend", "profile_replies"}
WEB = {"_id": 100, "media_name": "web"}
WEB_TASKS = {"article", "comment"}


def test_build_job_docs_profile_defaults_fill_every_field():
    job = JobInput(kind="profile", media="twitter", target=" @alice ")

    docs = build_job_docs(job, TWITTER, TWITTER_TASKS, NOW)

    assert [d["task"] for d in docs] == ["profile", "publication"]
    for doc in docs:
        assert doc == {
            "target": "alice",
            "media_name": "twitter",
            "media_name_id": 1,
            "task": doc["task"],
            "state": 1,
            "enabled": True,
            "execution_date": NOW,
            "human_validation": 0,
            "certitude": 0.5,
            "modified_at": NOW,
            "created_at": NOW,
            "attempt_count": 0,
            "interval_s": DEFAULT_INTERVAL_S,
        }


def test_build_job_docs_options_reach_the_documents():
    job = JobInput(
        kind="profile",
        media="twitter",
        target="bob",
        url="https://twitter.com/i/bob",
        tasks=["friend", "friend"],
        one_off=True,
        human_validation=True,
        certitude=0.9,
        start_at=datetime(2024, 6, 1, 8, 0),  # naive: UTC
    )

    docs = build_job_docs(job, TWITTER, TWITTER_TASKS, NOW)

    # `profile` is added (it runs first); a task given twice is scheduled once.
    assert [d["task"] for d in docs] == ["profile", "friend"]
    assert {d["interval_s"] for d in docs} == {None}
    assert {d["human_validation"] for d in docs} == {1}
    assert {d["certitude"] for d in docs} == {0.9}
    assert {d["url"] for d in docs} == {"https://twitter.com/i/bob"}
    assert {d["execution_date"] for d in docs} == {datetime(2024, 6, 1, 8, 0, tzinfo=UTC)}


def test_build_job_docs_website_interval_and_default_media():
    job = JobInput(kind="website", target="https://example.org/a", interval_s=3600)
    assert job.media_name == "web"

    docs = build_job_docs(job, WEB, WEB_TASKS, NOW)

    assert [(d["task"], d["target"], d["interval_s"]) for d in docs] == [
        ("article", "https://example.org/a", 3600)
    ]


@pytest.mark.parametrize(
    ("fields", "media", "media_tasks", "message"),
    [
        ({"kind": "profile", "media": "twitter", "target": "a", "tasks": ["article"]},
         TWITTER, TWITTER_TASKS, "unknown task(s) 'article' for a profile"),
        ({"kind": "profile", "media": "twitter", "target": "a", "tasks": ["stories"]},
         TWITTER, TWITTER_TASKS, "media twitter does not offer task(s) stories"),
        ({"kind": "profile", "media": "twitter", "target": "a", "tasks": ["profile"]},
         TWITTER, TWITTER_TASKS, "a profile needs the profile task and at least one more"),
        ({"kind": "profile", "media": "twitter", "target": "a", "tasks": []},
         TWITTER, TWITTER_TASKS, "a profile needs the profile task and at least one more"),
        ({"kind": "profile", "media": "twitter", "target": "  @ "},
         TWITTER, TWITTER_TASKS, "profile handle is empty"),
        ({"kind": "profile", "media": "twitter", "target": "a b"},
         TWITTER, TWITTER_TASKS, "must not contain spaces"),
        ({"kind": "profile", "media": "twitter", "target": "a", "url": "ftp://x"},
         TWITTER, TWITTER_TASKS, "must be an http(s) URL"),
        ({"kind": "website", "target": "example.org"},
         WEB, WEB_TASKS, "website target must be an http(s) URL"),
        ({"kind": "website", "target": "ftp://example.org"},
         WEB, WEB_TASKS, "website target must be an http(s) URL"),
        ({"kind": "website", "target": "http://[::1"},
         WEB, WEB_TASKS, "website target must be an http(s) URL"),
        ({"kind": "website", "target": "https://example.org", "tasks": []},
         WEB, WEB_TASKS, "a website needs a task; got none"),
        ({"kind": "website", "target": "https://example.org", "tasks": ["profile"]},
         WEB, WEB_TASKS, "unknown task(s) 'profile' for a website"),
    ],
)  # fmt: skip
def test_build_job_docs_rejects_with_a_reason(fields, media, media_tasks, message):
    with pytest.raises(BadJobInput) as info:
        build_job_docs(JobInput(**fields), media, media_tasks, NOW)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"kind": "profile", "media": "twitter"}, "target: Field required"),
        ({"kind": "blog", "target": "x"}, "kind: Input should be 'profile' or 'website'"),
        ({"kind": "website", "target": "https://a.b", "certitude": 2}, "certitude"),
        ({"kind": "website", "target": "https://a.b", "interval_s": 0}, "interval_s"),
        ({"kind": "website", "target": "https://a.b", "one_off": True, "interval_s": 60},
         "either interval_s or one_off"),
        ({"kind": "website", "target": "https://a.b", "colour": "red"}, "colour: Extra inputs"),
    ],
)  # fmt: skip
def test_job_input_from_row_translates_validation_errors(row, message):
    with pytest.raises(BadJobInput) as info:
        job_input_from_row(row)
    assert message in str(info.value)


def test_job_input_from_row_kind_fills_in_but_does_not_override():
    assert job_input_from_row({"target": "https://a.b"}, "website").kind == "website"
    with pytest.raises(BadJobInput, match="differs from the --kind"):
        job_input_from_row({"kind": "profile", "target": "a"}, "website")


def test_profile_without_media_is_refused():
    with pytest.raises(BadJobInput, match="a profile needs a media"):
        _ = JobInput(kind="profile", target="a").media_name


def test_parse_import_file_json_lines(tmp_path: Path):
    path = tmp_path / "jobs.jsonl"
    path.write_bytes(
        b'{"kind": "website", "target": "https://a.b"}\n'
        b"\n"
        b"{not json\n"
        b"[1, 2]\n"
        b'{"target": "\xff"}\n'
        b'{"target": "last"}'
    )

    rows = list(parse_import_file(path))

    assert [line for line, _ in rows] == [1, 3, 4, 5, 6]
    assert rows[0][1] == {"kind": "website", "target": "https://a.b"}
    assert "not valid JSON" in str(rows[1][1])
    assert "expected a JSON object, got list" in str(rows[2][1])
    assert isinstance(rows[3][1], BadJobInput)
    assert rows[4][1] == {"target": "last"}


def test_parse_import_file_csv(tmp_path: Path):
    path = tmp_path / "jobs.CSV"
    path.write_bytes(
        "\ufeffkind,media,target,tasks,certitude\n"
        "profile,twitter,alice,profile; friend ,0.7\n"
        "\n"
        'website,,"https://a.b/x,y",,\n'
        "profile,twitter,bob,,,extra\n"
        "profile,twitter,béb\n".encode()
        + b"profile,twitter,\xff\n"
    )

    rows = list(parse_import_file(path))

    assert rows[0] == (
        2,
        {"kind": "profile", "media": "twitter", "target": "alice",
         "tasks": ["profile", "friend"], "certitude": "0.7"},
    )  # fmt: skip
    assert rows[1] == (4, {"kind": "website", "target": "https://a.b/x,y"})
    assert rows[2][0] == 5
    assert "6 cells but the header names 5 columns" in str(rows[2][1])
    assert rows[3] == (6, {"kind": "profile", "media": "twitter", "target": "béb"})
    assert rows[4][0] == 7
    assert "not valid UTF-8" in str(rows[4][1])


def test_parse_import_file_csv_rows_become_jobs(tmp_path: Path):
    path = tmp_path / "jobs.csv"
    path.write_text(
        "kind,media,target,tasks,one_off,human_validation,interval_s\n"
        "profile,twitter,alice,profile;friend,true,yes,\n"
    )
    ((_, row),) = list(parse_import_file(path))

    job = job_input_from_row(row)

    assert (job.tasks, job.one_off, job.human_validation) == (["profile", "friend"], True, True)


def test_parse_import_file_unknown_extension_and_missing_file(tmp_path: Path):
    (tmp_path / "jobs.txt").write_text("x")
    with pytest.raises(BadJobInput, match="unknown extension"):
        parse_import_file(tmp_path / "jobs.txt")
    with pytest.raises(OSError):
        parse_import_file(tmp_path / "missing.csv")


# -- properties --------------------------------------------------------------------------------

MEDIA_TASK_SETS = st.sets(st.sampled_from([*PROFILE.tasks, *WEBSITE.tasks]))
TASK_NAMES = st.sampled_from([*PROFILE.tasks, *WEBSITE.tasks, "nope", ""])
ANY_TARGET = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", "@", "a b", "a/b", "http://[::1", "http://", "ftp://x.org"]),
)
PLAUSIBLE_TARGET = {
    "profile": st.from_regex(r"@?[a-z0-9_.]{1,12}", fullmatch=True),
    "website": st.from_regex(r"https?://[a-z0-9.-]{1,15}(/[a-z0-9/]{0,10})?", fullmatch=True),
}


def _rows(kind: str) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries(
        {"kind": st.just(kind), "target": st.one_of(PLAUSIBLE_TARGET[kind], ANY_TARGET)},
        optional={
            "media": st.one_of(st.none(), st.text(max_size=10)),
            "url": st.one_of(st.none(), PLAUSIBLE_TARGET["website"], ANY_TARGET),
            "tasks": st.one_of(st.none(), st.lists(TASK_NAMES, max_size=6)),
            "interval_s": st.one_of(st.none(), st.integers(-5, 10**12)),
            "one_off": st.booleans(),
            "human_validation": st.booleans(),
            "certitude": st.one_of(st.floats(0, 1), st.floats(allow_nan=True)),
            "start_at": st.one_of(st.none(), st.datetimes(timezones=st.timezones())),
        },
    )


ROWS = st.sampled_from(["profile", "website"]).flatmap(_rows)


@given(row=ROWS, media_tasks=MEDIA_TASK_SETS, now=st.datetimes(timezones=st.just(UTC)))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_build_job_docs_is_valid_or_bad_job_input(row, media_tasks, now):
    try:
        job = job_input_from_row(row)
        docs = build_job_docs(job, {"_id": 7, "media_name": "m"}, media_tasks, now)
    except BadJobInput:
        return
    tasks = [d["task"] for d in docs]
    kind = TARGET_KINDS[job.kind]
    assert set(tasks) <= media_tasks
    assert set(tasks) <= set(kind.tasks)
    assert len(tasks) == len(set(tasks)) >= MIN_TASKS[job.kind]
    if job.kind == "profile":
        assert tasks[0] == "profile"
    for doc in docs:
        assert doc["state"] == 1 and doc["attempt_count"] == 0 and doc["media_name_id"] == 7
        assert doc["execution_date"].utcoffset() == timedelta(0)
        assert 0 <= doc["certitude"] <= 1
        assert doc["interval_s"] is None or doc["interval_s"] > 0
        assert doc["target"].strip() and doc["target"] == doc["target"].strip()


GARBAGE_LINES = st.lists(
    st.one_of(
        st.binary(max_size=40),
        st.text(max_size=40).map(str.encode),
        st.sampled_from([b'{"kind": "profile"', b'"a,b', b"a,b,c,d,e,f,g", b"\x00", b"{}", b"[]"]),
    ),
    max_size=12,
)


@given(lines=GARBAGE_LINES, suffix=st.sampled_from([".jsonl", ".ndjson", ".csv"]))
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_parse_import_file_never_raises_on_garbage(lines, suffix):
    header = [b"kind,media,target,tasks,certitude"] if suffix == ".csv" else []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"garbage{suffix}"
        content = b"\n".join(header + lines)
        path.write_bytes(content)

        rows = list(parse_import_file(path))

    numbers = [n for n, _ in rows]
    assert numbers == sorted(numbers)
    assert all(1 <= n <= content.count(b"\n") + 1 for n in numbers)
    for _, row in rows:
        if isinstance(row, dict):
            with contextlib.suppress(BadJobInput):
                job_input_from_row(row)
        else:
            assert isinstance(row, BadJobInput)
