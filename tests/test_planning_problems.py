"""Why a job can't be planned: the reference join the audit uses and the diagnosis of its rows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from crawlsched.planning.problems import Problem, ReferenceIndex, diagnose

WHEN = datetime(2024, 6, 1, tzinfo=UTC)
TWITTER = {"media_name": "twitter", "media_name_id": 1}
TASK_ROW = {"media_name_id": 1, "name": "profile"}


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        # No media row, or an empty list of them (the join found nothing): the job names a
        # media that does not exist, so its document must be fixed.
        ({"_id": 1, "media_name": "ghost", "media": None}, ("unknown media 'ghost'", True)),
        ({"_id": 1, "media_name": "ghost", "media": []}, ("unknown media 'ghost'", True)),
        ({"_id": 1, "media": None}, ("unknown media None", True)),
        # An operator switched the media off: wait, do not set aside.
        (
            {"_id": 1, "media": {**TWITTER, "enabled": False}, "task": "profile"},
            ("media twitter is disabled", False),
        ),
        # A list is read by its first row (names are unique), not its last.
        (
            {"_id": 1, "media": [{**TWITTER, "enabled": False}, TWITTER], "task": "profile"},
            ("media twitter is disabled", False),
        ),
        (
            {"_id": 1, "media": {"enabled": False}, "task": "profile"},
            ("media ? is disabled", False),
        ),
        (
            {"_id": 1, "media": TWITTER, "task": "profile", "task_row": []},
            ("media twitter has no task 'profile'", True),
        ),
        (
            {"_id": 1, "media": TWITTER, "task": "profile", "task_row": None},
            ("media twitter has no task 'profile'", True),
        ),
        (
            {"_id": 1, "media": TWITTER, "task": "profile", "task_row": [{"enabled": False}]},
            ("task profile is disabled for media twitter", False),
        ),
        # Only the first task row counts, as in the pipeline's join.
        (
            {
                "_id": 1,
                "media": TWITTER,
                "task": "profile",
                "task_row": [{"enabled": True}, {"enabled": False}],
                "execution_date": "2024-01-01",
            },
            ("execution_date is str, not a date", True),
        ),
        (
            {"_id": 1, "media": TWITTER, "task": "profile", "task_row": [{}]},
            ("execution_date is NoneType, not a date", True),
        ),
        # An absent `enabled` means enabled: only an explicit false disables.
        (
            {
                "_id": 1,
                "media": {**TWITTER, "enabled": None},
                "task": "profile",
                "task_row": [{"enabled": 0}],
                "execution_date": WHEN,
            },
            ("not plannable for an unknown reason", True),
        ),
    ],
)
def test_diagnose_reason_table(row, expected):
    assert diagnose(row) == Problem(1, *expected)


def test_diagnose_keeps_the_job_id_whatever_its_type():
    assert diagnose({"_id": ("a", 2), "media": None}).job_id == ("a", 2)
    assert diagnose({"media": None}).job_id is None


def index(media, tasks):
    return ReferenceIndex(media, tasks)


def test_reference_index_joins_an_enabled_media_to_its_enabled_task_rows():
    media = {**TWITTER, "enabled": True}
    rows = [{**TASK_ROW, "enabled": True}, {**TASK_ROW, "priority": 2}]
    reference = index([media], rows)

    assert reference.join("twitter", "profile") == (media, rows)
    assert reference.plans("twitter", "profile")


@pytest.mark.parametrize(
    ("media", "tasks", "joined"),
    [
        # No media of that name: nothing to show.
        ([{"media_name": "youtube", "media_name_id": 1}], [TASK_ROW], (None, [])),
        # Every media of that name disabled: the first of them, and no task rows.
        (
            [{**TWITTER, "enabled": False}, {**TWITTER, "media_name_id": 2, "enabled": False}],
            [TASK_ROW],
            ({**TWITTER, "enabled": False}, []),
        ),
        # An enabled media whose row for the task is disabled: that media and that row.
        (
            [TWITTER],
            [{**TASK_ROW, "enabled": False}],
            (TWITTER, [{**TASK_ROW, "enabled": False}]),
        ),
        # An enabled media with no row for the task (another task, another media id).
        (
            [TWITTER],
            [{**TASK_ROW, "name": "publication"}, {**TASK_ROW, "media_name_id": 2}],
            (TWITTER, []),
        ),
    ],
)
def test_reference_index_join_shows_the_closest_miss(media, tasks, joined):
    reference = index(media, tasks)
    assert reference.join("twitter", "profile") == joined
    assert not reference.plans("twitter", "profile")


def test_reference_index_tries_every_enabled_media_of_the_name():
    # Two media share a name: the first has only a disabled row, the second an enabled one.
    first, second = TWITTER, {**TWITTER, "media_name_id": 2}
    reference = index(
        [{**TWITTER, "media_name_id": 9, "enabled": False}, first, second],
        [{**TASK_ROW, "enabled": False}, {**TASK_ROW, "media_name_id": 2}],
    )
    assert reference.join("twitter", "profile") == (second, [{**TASK_ROW, "media_name_id": 2}])
    assert reference.plans("twitter", "profile")
    # With no enabled row anywhere, the first enabled media and its (disabled) rows are shown.
    reference = index([first, second], [{**TASK_ROW, "enabled": False}])
    assert reference.join("twitter", "profile") == (first, [{**TASK_ROW, "enabled": False}])


@pytest.mark.parametrize(
    ("stored", "asked", "joins"),
    [
        # MongoDB's equality: 1 and 1.0 are one number, true is not 1, "1" is not 1.
        (1, 1.0, True),
        (2.0, 2, True),
        (True, True, True),
        (True, 1, False),
        (1, True, False),
        (False, 0, False),
        ("1", 1, False),
        ("twitter", "twitter", True),
        ("twitter", "Twitter", False),
    ],
)
def test_reference_index_matches_values_as_mongodb_does(stored, asked, joins):
    # Both joins go through the same keys: media by name, tasks by (media id, task name).
    by_name = index([{"media_name": stored, "media_name_id": 1}], [TASK_ROW])
    assert by_name.plans(asked, "profile") is joins
    by_id = index(
        [{"media_name": "twitter", "media_name_id": asked}],
        [{"media_name_id": stored, "name": "profile"}],
    )
    assert by_id.plans("twitter", "profile") is joins
    by_task = index([TWITTER], [{"media_name_id": 1, "name": stored}])
    assert by_task.plans("twitter", asked) is joins


@pytest.mark.parametrize("unjoinable", [None, ["twitter"], {"name": "twitter"}])
def test_reference_index_never_joins_null_arrays_or_documents(unjoinable):
    # Rows whose join value cannot be a key are left out, and a job with such a value finds
    # nothing (not even the rows left out).
    reference = index(
        [{"media_name": unjoinable, "media_name_id": 1}, TWITTER],
        [
            {"media_name_id": unjoinable, "name": "profile"},
            {"media_name_id": 1, "name": unjoinable},
        ],
    )
    assert reference.join(unjoinable, "profile") == (None, [])
    assert reference.join("twitter", unjoinable) == (TWITTER, [])
    assert reference.join("twitter", "profile") == (TWITTER, [])
    assert not reference.plans("twitter", "profile")


def test_reference_index_keeps_rows_of_one_key_in_order():
    rows = [{**TASK_ROW, "n": n} for n in range(3)]
    media = [{**TWITTER, "n": n, "enabled": False} for n in range(3)]
    assert index(media, rows).join("twitter", "profile") == (media[0], [])
    assert index([TWITTER], rows).join("twitter", "profile") == (TWITTER, rows)
