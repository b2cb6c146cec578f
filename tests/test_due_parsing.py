"""parse_due_job: a pipeline row becomes a DueJob, or BadJobDocument with a readable reason."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.errors import BadJobDocument
from crawlsched.planning.due import Category, DueJob, derive_target, parse_due_job
from tests.support.factories import utc_datetimes

names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1).filter(
    str.strip
)
valid_docs = st.fixed_dictionaries(
    {
        "_id": st.integers(0, 10**9) | st.uuids().map(str),
        "target": names,
        "task": st.sampled_from(["profile", "publication", "article"]),
        "media_name": names,
        "media_id": st.integers(0, 10**6),
        "driver_class": names,
        "need_login": st.booleans(),
        "need_selenium": st.booleans(),
        "crawl_limit": st.integers(1, 10**6),
        "batch_limit": st.none() | st.integers(1, 1000),
    },
    optional={"used_tool": st.none() | st.text(max_size=10)},
)

MISSING = object()
# Field -> values that must be refused. Booleans for counts and counts for flags are the trap:
# `bool` is an `int` subclass, so a bare isinstance check would let them through.
BAD_VALUES = {
    # A missing or null target is derived (see test_parse_due_job_derives_a_missing_target).
    "target": [7, True, b"x", ["x"], "", "   ", "\t\n"],
    "media_name": [MISSING, None, 3, False, ["x"]],
    "media_id": [MISSING, None, True, False, 1.0, "1", [1]],
    "driver_class": [MISSING, None, 0, True, {"x": 1}],
    "need_login": [MISSING, None, 0, 1, 1.0, "true", "false", []],
    "need_selenium": [MISSING, None, 0, 1, 0.0, "yes"],
    "crawl_limit": [MISSING, None, True, False, 0, -5, 2.5, 10.0, "10"],
    "batch_limit": [True, False, 0, -1, 2.5, "10", [10]],
}
bad_fields = st.sampled_from(sorted(BAD_VALUES)).flatmap(
    lambda f: st.tuples(st.just(f), st.sampled_from(BAD_VALUES[f]))
)
garbage = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=5),
    st.binary(max_size=3),
    utc_datetimes(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


def corrupt(doc, field, value):
    doc = dict(doc)
    if value is MISSING:
        doc.pop(field, None)
    else:
        doc[field] = value
    return doc


@settings(max_examples=100)
@given(valid_docs)
def test_parse_due_job_accepts_a_valid_row(doc):
    due = parse_due_job(doc)

    assert due == DueJob(
        id=doc["_id"],
        target=doc["target"],
        media_name=doc["media_name"],
        media_id=doc["media_id"],
        driver_class=doc["driver_class"],
        used_tool=doc.get("used_tool") or "",
        need_login=doc["need_login"],
        need_selenium=doc["need_selenium"],
        crawl_limit=doc["crawl_limit"],
        batch_limit=doc["batch_limit"],
    )
    assert due.category == Category.of(doc["need_login"], doc["need_selenium"])


@settings(max_examples=100)
@given(valid_docs, bad_fields)
def test_parse_due_job_refuses_a_bad_field_naming_it(doc, bad):
    field, value = bad
    with pytest.raises(BadJobDocument) as caught:
        parse_due_job(corrupt(doc, field, value))
    assert field in caught.value.reason
    assert caught.value.job_id == doc["_id"]


@settings(max_examples=100)
@given(valid_docs, st.lists(bad_fields, min_size=2, max_size=4))
def test_parse_due_job_refuses_several_bad_fields_with_one_reason(doc, bads):
    for field, value in bads:
        doc = corrupt(doc, field, value)
    with pytest.raises(BadJobDocument) as caught:
        parse_due_job(doc)
    assert any(field in caught.value.reason for field, _ in bads)


@settings(max_examples=100)
@given(
    valid_docs,
    st.dictionaries(st.sampled_from(sorted(BAD_VALUES)), garbage, min_size=1),
)
def test_parse_due_job_never_raises_anything_but_bad_job_document(doc, overrides):
    # Arbitrary values in the checked fields: either a DueJob or BadJobDocument, nothing else.
    doc = {**doc, **overrides}
    try:
        due = parse_due_job(doc)
    except BadJobDocument as e:
        assert e.reason
        return
    assert isinstance(due.target, str) and due.target.strip()
    assert type(due.need_login) is bool and type(due.need_selenium) is bool
    assert type(due.crawl_limit) is int and due.crawl_limit > 0
    assert type(due.media_id) is int
    assert due.batch_limit is None or (type(due.batch_limit) is int and due.batch_limit > 0)


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        (
            "crawl_limit",
            True,
            "core_tasks row (twitter, profile): crawl_limit must not be a boolean",
        ),
        ("need_login", 1, "core_tasks row (twitter, profile): need_login has type int"),
        ("media_id", None, "childs_socialmedia row: missing media_id"),
        ("target", " ", "job: target is empty"),
    ],
)
def test_parse_due_job_reason_table(field, value, reason):
    with pytest.raises(BadJobDocument) as caught:
        parse_due_job({**ROW, field: value})
    assert caught.value.reason.startswith(reason)
    assert str(caught.value).startswith("job j1: ")


@settings(max_examples=50)
@given(valid_docs, st.sampled_from([MISSING, None]), st.text(min_size=1, max_size=8))
def test_parse_due_job_derives_a_missing_target(doc, absent, username):
    # Jobs of the old system carry no target: the first non-empty mapped field names it...
    doc = corrupt(doc, "target", absent)
    named = {**doc, "username": username}
    expected = username if username.strip() else str(doc["_id"])
    assert parse_due_job(named, ["username", "url"]).target == expected
    # ...and failing all of them, the job's own _id.
    assert parse_due_job(doc, ["username", "url"]).target == str(doc["_id"])


ROW = {
    "_id": "j1",
    "target": "alice",
    "task": "profile",
    "media_name": "twitter",
    "media_id": 1,
    "driver_class": "http",
    "need_login": True,
    "need_selenium": False,
    "crawl_limit": 1,
    "batch_limit": 25,
}


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"target": 7}, "job: target has type int, expected str"),
        ({"target": ""}, "job: target is empty"),
        ({"crawl_limit": 0}, "core_tasks row (twitter, profile): crawl_limit must be > 0"),
        ({"crawl_limit": -1}, "core_tasks row (twitter, profile): crawl_limit must be > 0"),
        (
            {"crawl_limit": "9"},
            "core_tasks row (twitter, profile): crawl_limit has type str, expected <class 'int'>",
        ),
        ({"crawl_limit": None}, "core_tasks row (twitter, profile): missing crawl_limit"),
        (
            {"task": None, "crawl_limit": None},
            "core_tasks row (twitter, None): missing crawl_limit",
        ),
        (
            {"batch_limit": 10_001},
            "core_tasks row (twitter, profile): batch_limit must be an integer from 1 to 10000",
        ),
        (
            {"batch_limit": 0},
            "core_tasks row (twitter, profile): batch_limit must be an integer from 1 to 10000",
        ),
        (
            {"batch_limit": True},
            "core_tasks row (twitter, profile): batch_limit must be an integer from 1 to 10000",
        ),
        ({"need_selenium": None}, "core_tasks row (twitter, profile): missing need_selenium"),
        (
            {"need_selenium": "no"},
            "core_tasks row (twitter, profile): need_selenium has type str, expected <class 'bool",
        ),
        ({"media_name": 3}, "childs_socialmedia row: media_name has type int, expected"),
        ({"media_id": False}, "childs_socialmedia row: media_id must not be a boolean"),
        ({"driver_class": None}, "childs_socialmedia row (twitter): missing driver_class"),
    ],
)
def test_parse_due_job_exact_reason_table(changes, reason):
    with pytest.raises(BadJobDocument) as caught:
        parse_due_job({**ROW, **changes})
    assert caught.value.reason.startswith(reason)
    assert caught.value.job_id == "j1"


def test_parse_due_job_reasons_name_unknown_media_and_task_with_a_question_mark():
    row = {k: v for k, v in ROW.items() if k not in ("media_name", "task", "crawl_limit")}
    with pytest.raises(BadJobDocument) as caught:
        parse_due_job(row)
    assert caught.value.reason == "core_tasks row (?, ?): missing crawl_limit"


@pytest.mark.parametrize(
    ("changes", "parsed"),
    [
        # The edges of the limits are taken.
        ({"batch_limit": 10_000}, {"batch_limit": 10_000}),
        ({"batch_limit": 1}, {"batch_limit": 1}),
        ({"batch_limit": None}, {"batch_limit": None}),
        ({"crawl_limit": 1}, {"crawl_limit": 1}),
        # No tool, or a null one: an empty string.
        ({"used_tool": None}, {"used_tool": ""}),
        ({"used_tool": "httpx"}, {"used_tool": "httpx"}),
        ({"media_id": 0}, {"media_id": 0}),
    ],
)
def test_parse_due_job_takes_the_edges(changes, parsed):
    due = parse_due_job({**ROW, **changes})
    assert {k: getattr(due, k) for k in parsed} == parsed


def test_parse_due_job_reads_the_target_field_by_default():
    # Without mapped fields only `target` is read; a missing target falls back to the _id.
    assert parse_due_job(ROW).target == "alice"
    row = {k: v for k, v in ROW.items() if k != "target"}
    assert parse_due_job({**row, "username": "bob"}).target == "j1"
    assert derive_target({"_id": 5, "target": "t"}) == "t"
    # With mapped fields, a job's own target still comes first.
    assert parse_due_job({**ROW, "username": "bob"}, ["username"]).target == "alice"
    assert derive_target({"_id": 5, "url": "u"}) == "5"
    assert derive_target({"_id": 5, "a": " ", "b": "x"}, ["a", "b"]) == "x"


@pytest.mark.parametrize(
    ("login", "selenium", "category", "value"),
    [
        (True, False, Category.ONLY_LOGIN, "need_only_login"),
        (False, True, Category.ONLY_SELENIUM, "need_only_selenium"),
        (True, True, Category.SELENIUM_AND_LOGIN, "need_selenium_and_login"),
        (False, False, Category.NEITHER, "without_selenium_and_login"),
    ],
)
def test_category_of_the_two_flags_and_its_name(login, selenium, category, value):
    # The names are the original system's list names, logged and counted per run.
    assert Category.of(login, selenium) is category
    assert category.value == value
