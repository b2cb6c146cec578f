"""The planning pipeline against a plain-Python reference, on the embedded store and mongoeco.

The reference implements the planning step directly: filter the due jobs, sort them by
human_validation desc, certitude desc, modified_at asc, _id asc, join the enabled media and the
enabled task row, and split by the row's need flags.
"""

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlsched.planning.due import Category, parse_due_job
from crawlsched.planning.problems import diagnose
from crawlsched.reference import ReferenceData
from crawlsched.store.jobs import MongoJobStore
from crawlsched.store.pipeline import PROJECTED_FIELDS
from crawlsched.store.reference import MongoReferenceStore
from tests.support.factories import NOW


def _task(login, selenium, batch_limit=None, enabled=True):
    return {
        "need_login": login,
        "need_selenium": selenium,
        "crawl_limit": 7,
        "batch_limit": batch_limit,
        "enabled": enabled,
    }


REFERENCE = ReferenceData.model_validate(
    {
        "models": ["profile", "publication"],
        "media": [
            {
                "name": "alpha",
                "id": 1,
                "driver_class": "http",
                "used_tool": "httpx",
                "tasks": {"profile": _task(True, False, 3), "publication": _task(True, True)},
            },
            {
                "name": "beta",
                "id": 2,
                "driver_class": "browser",
                "tasks": {"profile": _task(False, True, 2), "publication": _task(False, False)},
            },
            {
                "name": "gamma",
                "id": 3,
                "driver_class": "http",
                # A disabled task row: gamma's publication jobs wait.
                "tasks": {
                    "profile": _task(False, False),
                    "publication": _task(True, False, 5, False),
                },
            },
            {
                "name": "delta",
                "id": 4,
                "enabled": False,
                "driver_class": "http",
                "tasks": {"profile": _task(False, False), "publication": _task(False, False)},
            },
            {
                # No publication row at all.
                "name": "epsilon",
                "id": 5,
                "driver_class": "http",
                "tasks": {"profile": _task(True, True, 4)},
            },
        ],
    }
)
MEDIA = {m.id: m for m in REFERENCE.media}
UNKNOWN_MEDIA_ID = 99


def media_name_of(media_id):
    return MEDIA[media_id].name if media_id in MEDIA else "ghost"


TASKS = ("profile", "publication")


def is_due(job, now, task=None):
    return (
        (task is None or job["task"] == task)
        and job["execution_date"] <= now
        and job.get("enabled") is not False
        and job["state"] in (1, 3)
        and job.get("exhausted") is not True
        and job.get("problem") is None
    )


def reference_categorized(jobs, task, now):
    """Step 2 in plain Python: the four lists of _id, each in priority order."""
    due = sorted(
        (j for j in jobs if is_due(j, now, task)),
        key=lambda j: (-j["human_validation"], -j["certitude"], j["modified_at"], j["_id"]),
    )
    out = {category: [] for category in Category}
    for job in due:
        media = MEDIA.get(job["media_name_id"])
        if media is None or not media.enabled:
            continue
        row = media.tasks.get(task)
        if row is None or not row.enabled:
            continue
        out[Category.of(row.need_login, row.need_selenium)].append(job["_id"])
    return out


# Few distinct values for the sort keys, so that ties (and the _id tie-break) are common.
MODIFIED = [NOW - timedelta(days=3), NOW - timedelta(days=3, milliseconds=1)]
EXECUTION_OFFSETS = [
    -timedelta(days=30),
    -timedelta(milliseconds=1),
    timedelta(0),
    timedelta(milliseconds=1),
    timedelta(hours=1),
]
ABSENT = object()


@st.composite
def job_sets(draw, max_size):
    n = draw(st.integers(0, max_size))
    # Inserted in an order unrelated to _id, so that only the _id tie-break orders equal keys.
    ids = draw(st.permutations(range(n)))
    jobs = []
    for i, job_id in enumerate(ids):
        job = {
            "_id": job_id,
            "target": f"target-{i}",
            "task": draw(st.sampled_from(TASKS)),
            "media_name_id": (media_id := draw(st.sampled_from([*MEDIA, UNKNOWN_MEDIA_ID]))),
            "media_name": media_name_of(media_id),
            "human_validation": draw(st.booleans()),
            "certitude": draw(st.sampled_from([0.5, 0.9])),
            "modified_at": draw(st.sampled_from(MODIFIED)),
            "execution_date": NOW + draw(st.sampled_from(EXECUTION_OFFSETS)),
            "state": draw(st.integers(1, 4)),
            "enabled": draw(st.sampled_from([True, True, True, False])),
            "attempt_count": 0,
        }
        for field, values in (
            ("exhausted", [ABSENT, ABSENT, False, True]),
            ("problem", [ABSENT, ABSENT, None, {"reason": "bad", "found_at": NOW}]),
        ):
            value = draw(st.sampled_from(values))
            if value is not ABSENT:
                job[field] = value
        jobs.append(job)
    return jobs


@pytest.fixture
def reference_store(store):
    MongoReferenceStore(store.db).load(REFERENCE)
    return store


def test_pipeline_categorized_equals_the_reference(reference_store):
    store = reference_store

    @settings(
        max_examples=store.examples(embedded=60, mongoeco=12),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(job_sets(max_size=40 if store.is_embedded else 30))
    def check(jobs):
        name = store.collection()
        if jobs:
            store.db[name].insert_many(jobs)
        try:
            job_store = MongoJobStore(store.db, name)
            for task in TASKS:
                got = job_store.categorized(task, NOW)
                assert {c: [row["_id"] for row in got[c]] for c in Category} == (
                    reference_categorized(jobs, task, NOW)
                )
                for category, rows in got.items():
                    for row in rows:
                        # Only the projected fields, lifted from the joins, and parseable.
                        assert set(row) <= set(PROJECTED_FIELDS)
                        due = parse_due_job(row)
                        media = MEDIA[row["media_id"]]
                        task_row = media.tasks[task]
                        assert (due.media_name, due.driver_class) == (
                            media.name,
                            media.driver_class,
                        )
                        assert (due.crawl_limit, due.batch_limit) == (
                            task_row.crawl_limit,
                            task_row.batch_limit,
                        )
                        assert due.category == category
            # Tasks with no due job are skipped before any aggregation.
            assert job_store.due_tasks(NOW) == sorted({j["task"] for j in jobs if is_due(j, NOW)})
        finally:
            store.db[name].drop()

    check()


def test_pipeline_orders_by_priority_then_id_whatever_the_insertion_order(reference_store):
    def job(job_id, validated, certitude, days_untouched):
        return {
            "_id": job_id,
            "target": f"t{job_id}",
            "task": "profile",
            "media_name_id": 1,
            "media_name": "alpha",
            "state": 1,
            "enabled": True,
            "execution_date": NOW,
            "human_validation": validated,
            "certitude": certitude,
            "modified_at": NOW - timedelta(days=days_untouched),
        }

    reference_store.db.profiles.insert_many(
        [
            job(7, False, 0.9, 5),
            job(3, True, 0.1, 0),  # validated beats any certitude
            job(6, False, 0.9, 9),  # older beats newer at equal certitude
            job(2, False, 0.5, 1),
            job(5, False, 0.5, 1),  # full ties: smaller _id first
            job(1, False, 0.5, 1),
        ]
    )

    rows = MongoJobStore(reference_store.db, "profiles").categorized("profile", NOW)

    assert [r["_id"] for r in rows[Category.ONLY_LOGIN]] == [3, 6, 7, 1, 2, 5]


def test_pipeline_due_tasks_skips_tasks_without_due_jobs(reference_store):
    # Given publication jobs that are all either in the future, running, disabled or exhausted
    jobs = MongoJobStore(reference_store.db, "profiles")
    base = {
        "media_name_id": 1,
        "media_name": "alpha",
        "human_validation": False,
        "certitude": 0.5,
        "modified_at": NOW,
    }
    reference_store.db.profiles.insert_many(
        [
            {**base, "_id": 1, "target": "a", "task": "profile", "state": 1, "enabled": True,
             "execution_date": NOW},
            {**base, "_id": 2, "target": "b", "task": "publication", "state": 1, "enabled": True,
             "execution_date": NOW + timedelta(seconds=1)},
            {**base, "_id": 3, "target": "c", "task": "publication", "state": 2, "enabled": True,
             "execution_date": NOW},
            {**base, "_id": 4, "target": "d", "task": "publication", "state": 1, "enabled": False,
             "execution_date": NOW},
            {**base, "_id": 5, "target": "e", "task": "publication", "state": 3, "enabled": True,
             "execution_date": NOW, "exhausted": True},
        ]
    )  # fmt: skip

    # Then only profile is due, and the publication pipeline would return nothing
    assert jobs.due_tasks(NOW) == ["profile"]
    assert all(rows == [] for rows in jobs.categorized("publication", NOW).values())
    assert [r["_id"] for r in jobs.categorized("profile", NOW)[Category.ONLY_LOGIN]] == [1]
    # And a second later, publication's job 2 is due
    assert jobs.due_tasks(NOW + timedelta(seconds=1)) == ["profile", "publication"]


def test_pipeline_audit_diagnoses_why_a_job_is_never_planned(reference_store):
    # Given one job for each reason the planning pipeline can never return it, plus controls
    def job(job_id, media_id, task, **extra):
        return {
            "_id": job_id,
            "target": f"t{job_id}",
            "task": task,
            "media_name_id": media_id,
            "media_name": media_name_of(media_id),
            "state": 1,
            "enabled": True,
            "execution_date": NOW - timedelta(minutes=1),
            "human_validation": False,
            "certitude": 0.5,
            "modified_at": NOW,
            **extra,
        }

    reference_store.db.profiles.insert_many(
        [
            job("unknown_media", UNKNOWN_MEDIA_ID, "profile"),
            job("no_task_row", 5, "publication"),
            job("string_date", 1, "profile", execution_date="2024-01-01"),
            job("missing_date", 2, "profile", execution_date=None),
            job("disabled_media", 4, "profile"),
            job("disabled_task", 3, "publication"),
            # Controls: plannable now or later, or outside the audit's base filter.
            job("fine", 1, "profile"),
            job("fine_later", 2, "publication", execution_date=NOW + timedelta(days=1)),
            job("switched_off", UNKNOWN_MEDIA_ID, "friend", enabled=False),
            job("exhausted", UNKNOWN_MEDIA_ID, "stories", exhausted=True),
            job("running", UNKNOWN_MEDIA_ID, "comment", state=2),
            job("set_aside", UNKNOWN_MEDIA_ID, "article", problem={"reason": "x"}),
        ]
    )
    jobs = MongoJobStore(reference_store.db, "profiles")

    # When the audit rows are diagnosed
    problems = {p.job_id: p for p in map(diagnose, jobs.audit(NOW))}

    # Then each problem job is found, set aside only when its document must be fixed
    assert {job_id: p.set_aside for job_id, p in problems.items()} == {
        "unknown_media": True,
        "no_task_row": True,
        "string_date": True,
        "missing_date": True,
        "disabled_media": False,
        "disabled_task": False,
    }
    assert "unknown media 'ghost'" in problems["unknown_media"].reason
    assert "no task 'publication'" in problems["no_task_row"].reason
    assert "str, not a date" in problems["string_date"].reason
    assert "delta is disabled" in problems["disabled_media"].reason
    assert "task publication is disabled" in problems["disabled_task"].reason

    # And once the set-aside ones are flagged, the next audit shows only the waiting ones
    flagged = [p for p in problems.values() if p.set_aside]
    assert jobs.set_aside(flagged, NOW) == 4
    assert sorted(diagnose(r).job_id for r in jobs.audit(NOW)) == [
        "disabled_media",
        "disabled_task",
    ]
