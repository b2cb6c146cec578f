"""Jobs as an operator gives them (command line, an import file's rows), checked and turned
into documents.

Pure: no pymongo, no dramatiq, no clock (`now` is an argument). The caller resolves the media
row and the tasks it offers; this module decides what to insert and why a row is refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from urllib.parse import urlsplit

from bson import json_util
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from crawlsched.catalog import (
    DEFAULT_WEBSITE_MEDIA,
    MAX_DEPTH,
    MAX_INTERVAL_S,
    MAX_PAGES,
    TARGET_KINDS,
    JobState,
)
from crawlsched.drivers.targets import check_literal
from crawlsched.errors import BadJobInput, UnsafeTarget

DEFAULT_INTERVAL_S = 24 * 3600  # a recurring job is crawled again daily unless told otherwise
MIN_TASKS = {"profile": 2, "website": 1}  # a profile: `profile` plus one more (DESIGN.md §1)
# Fields of a website job stored as given (the bounds, and how its list pages paginate).
WEBSITE_ONLY = ("max_depth", "max_pages", "pagination", "page_param")


class JobInput(BaseModel):
    """One target to crawl with its tasks; a `tasks` of None means the kind's default tasks."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["profile", "website"]
    media: str | None = Field(None, min_length=1)
    target: str
    url: str | None = None
    tasks: list[str] | None = None
    interval_s: int | None = Field(None, gt=0, le=MAX_INTERVAL_S)
    one_off: bool = False
    human_validation: bool = False
    certitude: float = Field(0.5, ge=0.0, le=1.0)
    start_at: datetime | None = None  # naive means UTC
    # A website's own discovery bounds, over its media's (see `crawlsched.drivers.context`).
    max_depth: int | None = Field(None, ge=0, le=MAX_DEPTH)
    max_pages: int | None = Field(None, ge=0, le=MAX_PAGES)
    # How the website driver walks a site's list pages (a driver that ignores it: no effect).
    pagination: Literal["next_link", "page_param"] | None = None
    page_param: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]{1,40}$")

    @model_validator(mode="after")
    def _one_schedule(self) -> JobInput:
        if self.one_off and self.interval_s is not None:
            raise ValueError("give either interval_s or one_off, not both")
        return self

    @model_validator(mode="after")
    def _website_fields(self) -> JobInput:
        given = [name for name in WEBSITE_ONLY if getattr(self, name) is not None]
        if self.kind != "website" and given:
            raise ValueError(f"{', '.join(given)}: only a website job takes these")
        if self.page_param is not None and self.pagination != "page_param":
            raise ValueError("page_param: only with pagination page_param")
        return self

    @property
    def media_name(self) -> str:
        if self.media is not None:
            return self.media
        if self.kind == "website":
            return DEFAULT_WEBSITE_MEDIA
        raise BadJobInput("a profile needs a media (e.g. twitter)")


def job_input_from_row(row: Mapping[str, Any], kind: str | None = None) -> JobInput:
    """Validate one raw row; `kind` fills in a row without one (a different one is refused)."""
    data = dict(row)
    if kind is not None:
        given = data.setdefault("kind", kind)
        if given != kind:
            raise BadJobInput(f"row kind {given!r} differs from the --kind {kind!r} asked for")
    try:
        return JobInput.model_validate(data)
    except ValidationError as e:
        raise BadJobInput(_describe(e)) from None


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


def _is_web_url(value: str) -> bool:
    if any(c.isspace() for c in value):
        return False
    try:
        parts = urlsplit(value)
    except ValueError:  # e.g. an unclosed IPv6 bracket
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _clean_target(job: JobInput) -> str:
    target = job.target.strip()
    if job.kind == "website":
        if not _is_web_url(target):
            raise BadJobInput(f"website target must be an http(s) URL, got {job.target!r}")
        return target
    # "@alice" and "alice" are one profile: url templates add the "@" where the media wants it.
    handle = target.removeprefix("@")
    if not handle:
        raise BadJobInput("profile handle is empty")
    if any(c.isspace() for c in handle) or "/" in handle:
        raise BadJobInput(f"profile handle must not contain spaces or '/', got {job.target!r}")
    return handle


def _chosen_tasks(job: JobInput, media_name: str, media_tasks: set[str]) -> list[str]:
    kind = TARGET_KINDS[job.kind]
    asked = list(kind.default_tasks) if job.tasks is None else list(job.tasks)
    if job.kind == "profile" and "profile" not in asked:
        asked.insert(0, "profile")  # the profile task runs first: it gets the profile's info
    unknown = [t for t in asked if t not in kind.tasks]
    if unknown:
        raise BadJobInput(
            f"unknown task(s) {', '.join(map(repr, unknown))} for a {job.kind}; "
            f"known: {', '.join(kind.tasks)}"
        )
    chosen = [t for t in kind.tasks if t in asked]  # catalog order, duplicates dropped
    missing = [t for t in chosen if t not in media_tasks]
    if missing:
        offered = ", ".join(t for t in kind.tasks if t in media_tasks) or "none"
        raise BadJobInput(
            f"media {media_name} does not offer task(s) {', '.join(missing)}; "
            f"it offers for a {job.kind}: {offered}"
        )
    if len(chosen) < MIN_TASKS[job.kind]:
        need = "the profile task and at least one more" if job.kind == "profile" else "a task"
        raise BadJobInput(f"a {job.kind} needs {need}; got {', '.join(chosen) or 'none'}")
    return chosen


def build_job_docs(
    job: JobInput,
    media_row: Mapping[str, Any],
    media_tasks: set[str],
    now: datetime,
    allowed_networks: Sequence[Any] = (),
) -> list[dict[str, Any]]:
    """One pending job document per task, or BadJobInput saying what to change.

    URLs are checked as far as they can be without DNS (scheme, userinfo, private or loopback
    IP literals unless an allowed network admits them); names are checked again at each fetch.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    media_name = str(media_row.get("media_name") or job.media or "?")
    target = _clean_target(job)
    if job.url is not None and (job.kind == "website" or not _is_web_url(job.url)):
        raise BadJobInput(
            "url is for a profile whose address the media's template can't build, and must be "
            f"an http(s) URL; got {job.url!r} for a {job.kind}"
        )
    for url in (target if job.kind == "website" else None, job.url):
        if url is not None:
            try:
                check_literal(url, allowed_networks)
            except UnsafeTarget as e:
                raise BadJobInput(str(e)) from None
    tasks = _chosen_tasks(job, media_name, media_tasks)
    start = job.start_at or now
    try:
        start = start.replace(tzinfo=UTC) if start.tzinfo is None else start.astimezone(UTC)
    except OverflowError:
        raise BadJobInput(f"start_at {job.start_at} is out of range") from None
    interval_s = None if job.one_off else (job.interval_s or DEFAULT_INTERVAL_S)
    common: dict[str, Any] = {
        "target": target,
        "media_name": media_name,
        "media_name_id": media_row.get("media_name_id", media_row["_id"]),
        "state": int(JobState.PENDING),
        "enabled": True,
        "execution_date": start,
        "human_validation": int(job.human_validation),
        "certitude": float(job.certitude),
        "modified_at": now,
        "created_at": now,
        "attempt_count": 0,
        "interval_s": interval_s,
    }
    if job.url is not None:
        common["url"] = job.url
    for name in WEBSITE_ONLY:
        if (value := getattr(job, name)) is not None:
            common[name] = value
    return [{**common, "task": task} for task in tasks]


# -- importing job documents as they are (--preserve) ------------------------------------------

# Fields `--preserve` keeps from the file (checked); anything else the row carries is kept too
# (the old system's own fields, e.g. a username a target is derived from), except ours below.
PRESERVED_FIELDS = (
    "_id",
    "state",
    "enabled",
    "execution_date",
    "modified_at",
    "human_validation",
    "certitude",
    "attempt_count",
)
# Bookkeeping of a dispatch in flight: meaningless in another database, dropped on import.
DISPATCH_FIELDS = ("dispatch_id", "lease_deadline", "run_id", "problem")


def from_extended_json(row: Mapping[str, Any]) -> dict[str, Any]:
    """Decode MongoDB extended JSON (`{"$oid": …}`, `{"$date": …}`), as mongoexport writes."""
    return json_util.loads(json.dumps(dict(row)))


def _when(value: Any, field: str, now: datetime) -> datetime:
    if value is None:
        return now
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise BadJobInput(f"{field} is not an ISO 8601 date: {value!r}") from None
    if not isinstance(value, datetime):
        raise BadJobInput(f"{field} must be a date, got {type(value).__name__}")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _scrape_target_timing(doc: dict[str, Any], now: datetime) -> None:
    """A dispatcher's scrape target (`frequency` seconds, `last_scheduled`) is due when
    last_scheduled + frequency <= now: that is our `execution_date`, and `frequency` is our
    `interval_s` (a job is due again that long after it ran). Derived only when absent."""
    frequency = doc.get("frequency")
    if frequency is None:
        return
    if (
        isinstance(frequency, bool)
        or not isinstance(frequency, int | float)
        or not 0 < frequency <= MAX_INTERVAL_S
    ):
        raise BadJobInput(
            f"frequency must be seconds from 1 to {MAX_INTERVAL_S}, got {frequency!r}"
        )
    doc.setdefault("interval_s", frequency)
    if doc.get("execution_date") is None and doc.get("last_scheduled") is not None:
        doc["last_scheduled"] = last = _when(doc["last_scheduled"], "last_scheduled", now)
        doc["execution_date"] = last + timedelta(seconds=frequency)


def preserved_job_doc(
    row: Mapping[str, Any],
    media_row: Mapping[str, Any],
    media_tasks: set[str],
    now: datetime,
) -> dict[str, Any]:
    """One job document as the file has it, checked; BadJobInput says what to fix."""
    doc = {k: v for k, v in row.items() if k not in ("kind", "media", *DISPATCH_FIELDS)}
    bad = [k for k in doc if not isinstance(k, str) or k.startswith("$") or "." in k]
    if bad:
        raise BadJobInput(f"field names must not start with $ or contain '.': {bad[:3]}")
    task = doc.get("task")
    if not isinstance(task, str) or task not in media_tasks:
        offered = ", ".join(sorted(media_tasks)) or "none"
        raise BadJobInput(
            f"task {task!r} is not one media {media_row['media_name']} offers: {offered}"
        )
    state = doc.get("state", int(JobState.PENDING))
    if isinstance(state, bool) or state not in tuple(int(s) for s in JobState):
        raise BadJobInput(f"state must be one of 1, 2, 3, 4, got {state!r}")
    # A row without a state is a job to crawl: pending (stored, so the planner sees it).
    doc["state"] = state
    if state == int(JobState.RUNNING):
        # Running when the dump was taken, with no worker here: kept running, with a dispatch
        # deadline already passed, so the next tick reclaims it like a job whose worker died.
        doc["lease_deadline"] = now
    enabled = doc.get("enabled", True)
    if not isinstance(enabled, bool):
        raise BadJobInput(f"enabled must be true or false, got {enabled!r}")
    _scrape_target_timing(doc, now)
    doc["execution_date"] = _when(doc.get("execution_date"), "execution_date", now)
    doc["modified_at"] = _when(doc.get("modified_at"), "modified_at", now)
    certitude = doc.get("certitude", 0.5)
    if (
        isinstance(certitude, bool)
        or not isinstance(certitude, int | float)
        or not 0 <= certitude <= 1
    ):
        raise BadJobInput(f"certitude must be a number from 0 to 1, got {certitude!r}")
    validated = doc.get("human_validation", 0)
    if not isinstance(validated, bool | int) or validated not in (0, 1):
        raise BadJobInput(f"human_validation must be 0, 1, true or false, got {validated!r}")
    attempts = doc.get("attempt_count", 0)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 0:
        raise BadJobInput(f"attempt_count must be a whole number >= 0, got {attempts!r}")
    target = doc.get("target")
    if target is not None and (not isinstance(target, str) or not target.strip()):
        raise BadJobInput(f"target must be a non-empty string when given, got {target!r}")
    doc["media_name"] = media_row["media_name"]
    doc["media_name_id"] = media_row.get("media_name_id", media_row["_id"])
    doc.setdefault("created_at", now)
    return doc
