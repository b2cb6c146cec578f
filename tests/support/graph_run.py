"""Runs over a served link graph: the reference row, the seed job, the schedule, the checks."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from crawlsched.catalog import JobState
from crawlsched.flow import schedule_ops
from crawlsched.planning.run_names import FINISHED, run_id_for
from crawlsched.reference import MediaRow, ReferenceData, TaskRow
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from tests.support.waiting import wait_for

GRAPH_MEDIA = MediaRow(
    name="graph",
    id=900,
    driver_class="http",
    used_tool="httpx",
    max_depth=1000,
    max_pages=100_000,
    tasks={
        "article": TaskRow(need_login=False, need_selenium=False, crawl_limit=1000, batch_limit=8)
    },
)
REFERENCE = ReferenceData(
    models=["profile", "publication", "comment", "friend", "story", "article"], media=[GRAPH_MEDIA]
)


def prepare(rt: Runtime, max_depth: int | None = None, batch_limit: int | None = None) -> None:
    rt.create_indexes()
    media = GRAPH_MEDIA
    if max_depth is not None:
        media = media.model_copy(update={"max_depth": max_depth})
    if batch_limit is not None:
        task = media.tasks["article"].model_copy(update={"batch_limit": batch_limit})
        media = media.model_copy(update={"tasks": {"article": task}})
    rt.reference.load(REFERENCE.model_copy(update={"media": [media]}))


def add_graph_schedule(rt: Runtime, base_url: str, schedule_id: str, **given: object) -> str:
    """A seed job on the graph's start page and a schedule of just that target (with the
    schedule fields `given`, e.g. webhook=URL, notify_on=[…])."""
    now = rt.now()
    target = f"{base_url}/p/0"
    job = {
        "target": target,
        "media_name": "graph",
        "media_name_id": GRAPH_MEDIA.id,
        "task": "article",
        "state": int(JobState.PENDING),
        "enabled": True,
        "execution_date": now - timedelta(seconds=1),
        "attempt_count": 0,
        "modified_at": now,
        "created_at": now,
        "interval_s": 3600,
    }
    rt.jobs("websites").insert_new([job])
    given = {"interval_s": 3600, "target_collection": "websites", "targets": [target], **given}
    schedule_ops.create(rt, schedule_id, given)
    return target


def stored_paths(rt: Runtime, run_id: str, base_url: str) -> set[str]:
    return {
        doc["key"].removeprefix(base_url)
        for doc in rt.db.articles.find({"run_id": run_id}, {"key": 1})
    }


def start_graph_run(rt: Runtime, base_url: str, schedule_id: str) -> str:
    """A graph schedule (`add_graph_schedule`) fired a second ago through the planner's queue
    (the workers plan it); the run's id."""
    from crawlsched.actors.planner import plan_crawls

    add_graph_schedule(rt, base_url, schedule_id)
    fire_at = rt.now() - timedelta(seconds=1)
    plan_crawls.send(schedule_id, fire_at.isoformat())
    return run_id_for(schedule_id, fire_at)


def ended_run(rt: Runtime, run_id: str) -> dict | None:
    """The run once it has ended, else None (to poll with `wait_for`)."""
    run = rt.runs.get(run_id)
    return run if run and run["state"] == FINISHED else None


def announced_end(rt: Runtime, run_id: str) -> dict | None:
    """The run once it has ended and its end was announced (its event emitted: the end probe
    has its row), else None. What a test waits for before it stops the workers: the run's
    state changes a moment before the worker that ended it announces it, and a worker stopped
    in between leaves the announcement to the ticker's relay, which no test here runs."""
    run = ended_run(rt, run_id)
    return run if run and not run.get("announce") else None


def wait_for_end(rt: Runtime, run_id: str, workers, timeout: float = 180.0) -> dict:
    """The run once it has ended and its end was announced (`announced_end`), waited for up to
    `timeout`; on a timeout the workers' last output is printed first, to say what they were
    doing."""
    try:
        return wait_for(lambda: announced_end(rt, run_id), timeout, "the run to end")
    except AssertionError:
        print(workers.output()[-4000:])
        raise


def worker_graph_env(
    broker_url: str, mongo_url: str, mongo_db: str, tmp_path: Path
) -> tuple[Runtime, dict[str, str], str]:
    """A runtime on the shared server with the graph's reference loaded, the environment of
    `dramatiq` workers that record every run end (tests/support/end_probe.py), and the path
    of that record."""
    from tests.support.workers import TEST_SECRET_KEY, TEST_SIGNING_KEY, crawlsched_env

    settings = Settings(
        mongo_url=mongo_url,
        mongo_db=mongo_db,
        broker_url=broker_url,
        secret_key=TEST_SECRET_KEY,
        message_signing_key=TEST_SIGNING_KEY,
    )
    rt = Runtime(settings)
    prepare(rt)
    probe = tmp_path / "ends.jsonl"
    env = crawlsched_env(
        broker_url,
        mongo_url,
        mongo_db,
        CRAWLSCHED_DRIVER_MODULES='["tests.support.end_probe"]',
        CRAWLSCHED_TEST_END_PROBE=str(probe),
        # A batch whose message died with a killed worker is reclaimed after 30 s, not 15 min.
        CRAWLSCHED_DISPATCH_LEASE_S="30",
    )
    return rt, env, str(probe)
