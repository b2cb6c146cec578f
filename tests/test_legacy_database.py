"""Databases of the old system, loaded as they are, plan like the old pipeline read them.

The old shape: `childs_socialmedia` rows with their own `_id` and a `media_name_id`, flags often
absent; `core_tasks` rows keyed by (media_name_id, name), some missing; jobs carrying
`media_name` and no `target`. The reference below reads the old pipeline in plain Python:
due jobs (execution_date ≤ now, enabled, pending or failed, the task), sorted by
human_validation desc, certitude desc, modified_at asc (then `_id`), joined to their enabled
media by name and to the enabled task row by (media_name_id, task), split by the need flags.
"""

from datetime import timedelta

from bson import ObjectId
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlsched.planning.due import Category, parse_due_job
from crawlsched.store.jobs import MongoJobStore
from tests.support.factories import NOW, to_ms

MEDIA_NAMES = ["twitter", "news-site", "le.monde", "tik_tok"]
TASKS = ("profile", "publication")
ABSENT = object()
FLAG = st.sampled_from([ABSENT, ABSENT, True, False])
TARGET_FIELDS = ["target", "username", "url"]


def _put(doc, field, value):
    if value is not ABSENT:
        doc[field] = value


@st.composite
def old_databases(draw):
    media, tasks = [], []
    for i, name in enumerate(MEDIA_NAMES):
        row = {"_id": ObjectId(), "media_name": name, "media_name_id": 10 + i,
               "driver_class": "http", "used_tool": "requests"}  # fmt: skip
        _put(row, "enabled", draw(FLAG))
        media.append(row)
        for task in TASKS:
            if draw(st.integers(0, 4)) == 0:
                continue  # this media has no such task
            task_row = {"_id": ObjectId(), "media_name_id": 10 + i, "name": task,
                        "need_login": draw(st.booleans()), "need_selenium": draw(st.booleans()),
                        "crawl_limit": 5}  # fmt: skip
            _put(task_row, "enabled", draw(FLAG))
            tasks.append(task_row)
    jobs = []
    for _ in range(draw(st.integers(0, 30))):
        job = {
            "_id": ObjectId(),
            "media_name": draw(st.sampled_from([*MEDIA_NAMES, "gone"])),
            "task": draw(st.sampled_from(TASKS)),
            "state": draw(st.sampled_from([1, 1, 2, 3])),
            "execution_date": NOW + draw(st.sampled_from([-timedelta(days=1), timedelta(0),
                                                          timedelta(milliseconds=1)])),
            "human_validation": draw(st.sampled_from([0, 1])),
            "certitude": draw(st.sampled_from([0.5, 0.8])),
            # Microsecond-equal times: only the _id breaks these ties.
            "modified_at": to_ms(NOW - timedelta(days=draw(st.integers(0, 1)))),
        }  # fmt: skip
        _put(job, "enabled", draw(st.sampled_from([ABSENT, True, True, False])))
        _put(job, "username", draw(st.sampled_from([ABSENT, "someone"])))
        jobs.append(job)
    return media, tasks, jobs


def old_pipeline(media, tasks, jobs, task, now):
    by_name = {m["media_name"]: m for m in media}
    rows = {(t["media_name_id"], t["name"]): t for t in tasks}
    due = sorted(
        (
            j
            for j in jobs
            if j["task"] == task
            and j["execution_date"] <= now
            and j.get("enabled") is not False
            and j["state"] in (1, 3)
        ),
        key=lambda j: (-j["human_validation"], -j["certitude"], j["modified_at"], j["_id"]),
    )
    out = {c: [] for c in Category}
    for job in due:
        m = by_name.get(job["media_name"])
        if m is None or m.get("enabled") is False:
            continue
        row = rows.get((m["media_name_id"], task))
        if row is None or row.get("enabled") is False:
            continue
        out[Category.of(row["need_login"], row["need_selenium"])].append(job["_id"])
    return out


def test_legacy_database_plans_as_the_old_pipeline(store):
    @settings(
        max_examples=store.examples(embedded=50, mongoeco=10),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(old_databases())
    def check(database):
        media, tasks, jobs = database
        store.db.childs_socialmedia.drop()
        store.db.core_tasks.drop()
        store.db.childs_socialmedia.insert_many(media)
        if tasks:
            store.db.core_tasks.insert_many(tasks)
        name = store.collection()
        if jobs:
            store.db[name].insert_many(jobs)
        try:
            job_store = MongoJobStore(store.db, name)
            for task in TASKS:
                got = job_store.categorized(task, NOW, TARGET_FIELDS)
                assert {c: [r["_id"] for r in got[c]] for c in Category} == old_pipeline(
                    media, tasks, jobs, task, NOW
                )
                for rows in got.values():
                    for row in rows:
                        due = parse_due_job(row, TARGET_FIELDS)
                        expected = row.get("username") or str(row["_id"])
                        assert due.target == expected
        finally:
            store.db[name].drop()

    check()


@settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow])
@given(old_databases())
def test_legacy_dump_imported_with_preserve_plans_the_same(tmp_path_factory, database):
    # Given an old database, and what it plans
    import uuid

    from bson import json_util
    from typer.testing import CliRunner

    from crawlsched.cli import app
    from crawlsched.store.client import drop_embedded, open_database

    media, tasks, jobs = database
    source_url, target_url = (f"mongomock://legacy-{uuid.uuid4().hex}" for _ in range(2))
    try:
        source, target = (open_database(u, "crawlsched") for u in (source_url, target_url))
        for db in (source, target):
            db.childs_socialmedia.insert_many(media)
            if tasks:
                db.core_tasks.insert_many(tasks)
        if jobs:
            source.profiles.insert_many(jobs)

        def plan(db):
            store = MongoJobStore(db, "profiles")
            return {
                task: {c: [r["_id"] for r in rows] for c, rows in store.categorized(
                    task, NOW, TARGET_FIELDS).items()}
                for task in TASKS
            }  # fmt: skip

        before = plan(source)
        # When it is dumped as mongoexport would (extended JSON lines) and imported elsewhere
        dump = tmp_path_factory.mktemp("dump") / "profiles.jsonl"
        dump.write_text("".join(json_util.dumps(j) + "\n" for j in source.profiles.find({})))
        result = CliRunner().invoke(
            app,
            ["jobs", "import", "--preserve", "--kind", "profile", str(dump)],
            env={"CRAWLSCHED_MONGO_URL": target_url},
        )
        # Then every row whose media and task exist is imported, and the plans are equal
        assert result.exit_code in (0, 1), result.output
        assert plan(target) == before
        kept = {j["_id"]: j for j in target.profiles.find({})}
        for job in jobs:
            if job["_id"] in kept:
                for field in ("execution_date", "modified_at", "certitude", "human_validation"):
                    assert kept[job["_id"]][field] == job[field]
    finally:
        drop_embedded(source_url)
        drop_embedded(target_url)


def test_doctor_reports_what_would_plan_wait_or_be_set_aside_and_changes_nothing():
    import json
    import uuid

    from typer.testing import CliRunner

    from crawlsched.cli import app
    from crawlsched.store.client import drop_embedded, open_database

    url = f"mongomock://doctor-{uuid.uuid4().hex}"
    try:
        db = open_database(url, "crawlsched")
        db.childs_socialmedia.insert_many(
            [
                {"media_name": "news-site", "media_name_id": 7, "driver_class": "http"},
                {"media_name": "old.net", "media_name_id": 8, "driver_class": "http",
                 "enabled": False},
            ]
        )  # fmt: skip
        db.core_tasks.insert_one(
            {"media_name_id": 7, "name": "profile", "need_login": True, "need_selenium": False,
             "crawl_limit": 3}
        )  # fmt: skip
        due = {"state": 1, "task": "profile", "execution_date": NOW, "modified_at": NOW}
        db.profiles.insert_many(
            [
                {**due, "media_name": "news-site", "username": "a"},
                {**due, "media_name": "news-site"},  # no target at all: plans on its _id
                {**due, "media_name": "news-site", "task": "friend"},  # no such task row
                {**due, "media_name": "old.net"},  # media switched off: waits
                {**due, "media_name": "gone"},  # unknown media
                {**due, "media_name": "news-site", "target": 5},  # a target of the wrong type
            ]
        )
        before = list(db.profiles.find({}))

        result = CliRunner().invoke(app, ["doctor", "--json"], env={"CRAWLSCHED_MONGO_URL": url})

        assert result.exit_code == 0, result.output
        report = json.loads(result.output.splitlines()[0])
        assert report["collection"] == "profiles" and report["due"] == 6
        assert report["plan"] == {"profile / need_only_login": 2}
        assert report["wait"] == {"media old.net is disabled": 1}
        assert report["set_aside"] == {
            "media news-site has no task 'friend'": 1,
            "unknown media 'gone'": 1,
            "job: target has type int, expected str": 1,
        }
        assert list(db.profiles.find({})) == before  # read-only
    finally:
        drop_embedded(url)
