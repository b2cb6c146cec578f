"""What can be crawled: target kinds, their job collections and tasks, and where results go.

Pure tables, no I/O. A task name is also the crawl actor's name (`crawl_<task>`) and its queue
(`crawlsched.crawl.<task>`), so renaming one here is a migration, not a refactor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum

# The most jobs one batch (one crawl message) may hold: a task's batch limit above it is refused,
# and a message carrying more job ids is dead-lettered.
MAX_BATCH_JOBS = 10_000


class JobState(IntEnum):
    PENDING = 1
    RUNNING = 2
    FAILED = 3
    DONE = 4  # our addition: a one-off job that finished


# A job's state as callers read it (`pending`, `running`, `failed`, `done`).
STATE_NAMES = {int(s): s.name.lower() for s in JobState}


def by_state_name(counts: Mapping[str, int]) -> dict[str, int]:
    """Counts per state code (`{"1": 3}`, as the job store gives them) per state name, every
    state present: pending, running, failed, done, then other (a code no state has, e.g. a
    job of the old system)."""
    named = {name: counts.get(str(code), 0) for code, name in STATE_NAMES.items()}
    known = {str(code) for code in STATE_NAMES}
    return {**named, "other": sum(n for code, n in counts.items() if code not in known)}


# Jobs the planner may pick up.
PLANNABLE_STATES = (int(JobState.PENDING), int(JobState.FAILED))


@dataclass(frozen=True)
class TargetKind:
    name: str
    collection: str
    tasks: tuple[str, ...]
    default_tasks: tuple[str, ...]
    sweep_interval_s: int


PROFILE = TargetKind(
    name="profile",
    collection="profiles",
    tasks=("profile", "publication", "friend", "profile_replies", "stories"),
    # Adding a profile schedules at least two tasks: profile (runs first) and one more.
    default_tasks=("profile", "publication"),
    sweep_interval_s=5 * 60,
)
WEBSITE = TargetKind(
    name="website",
    collection="websites",
    tasks=("article", "comment"),
    default_tasks=("article",),
    sweep_interval_s=15 * 60,
)
TARGET_KINDS: dict[str, TargetKind] = {PROFILE.name: PROFILE, WEBSITE.name: WEBSITE}
JOB_COLLECTIONS: tuple[str, ...] = tuple(kind.collection for kind in TARGET_KINDS.values())
ALL_TASKS: tuple[str, ...] = tuple(t for kind in TARGET_KINDS.values() for t in kind.tasks)


@dataclass(frozen=True)
class ResultSink:
    model: str  # name in core_models; results are tagged with that model's id
    collection: str


TASK_RESULTS: dict[str, ResultSink] = {
    "profile": ResultSink("profile", "profile_data"),
    "publication": ResultSink("publication", "publications"),
    "friend": ResultSink("friend", "friends"),
    "profile_replies": ResultSink("comment", "comments"),
    "stories": ResultSink("story", "stories"),
    "article": ResultSink("article", "articles"),
    "comment": ResultSink("comment", "comments"),
}


def kind_of_collection(collection: str) -> TargetKind:
    for kind in TARGET_KINDS.values():
        if kind.collection == collection:
            return kind
    raise LookupError(f"no target kind stores its jobs in {collection!r}")


# Where each data model's documents are stored (results are upserted there by natural key).
MODEL_COLLECTIONS: dict[str, str] = {
    "profile": "profile_data",
    "publication": "publications",
    "comment": "comments",
    "friend": "friends",
    "story": "stories",
    "article": "articles",
}


# What one job may say of itself (`jobs_input`), kept here so that the command line checks an
# option without loading the job models.
MAX_INTERVAL_S = 366 * 24 * 3600  # at least yearly; larger values would overflow date maths
DEFAULT_WEBSITE_MEDIA = "web"
MAX_DEPTH = 1000  # links deep: as a media's reference row allows
MAX_PAGES = 10_000_000
