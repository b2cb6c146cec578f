"""The payloads actors exchange: ids and routing facts only, never secrets or whole documents."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from crawlsched.catalog import ALL_TASKS, JOB_COLLECTIONS, MAX_BATCH_JOBS
from crawlsched.errors import CrawlschedError
from crawlsched.ids import decode_id, encode_id
from crawlsched.planning.batching import Batch
from crawlsched.planning.due import Category
from crawlsched.resources.host_grouping import is_pacing_key


class BadMessage(CrawlschedError, ValueError):
    """A message whose arguments do not parse: never retried, dead-lettered at once."""


# Bounds on every payload: a message is untrusted input, and nothing in one may be big enough
# to hurt a worker, a log line or a MongoDB document.
MAX_ID_CHARS = 200
MAX_NAME_CHARS = 100
MAX_STAGES = 8
# Dispatch ids are minted by the planner and admission as uuid4().hex.
DISPATCH_ID_PATTERN = r"^[0-9a-f]{32}$"
# A stage name is a plain word; a stage's time is finite and at most 30 days in milliseconds.
StageName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z_]{0,31}$")]
StageMs = Annotated[float, Field(ge=0, le=30 * 86_400_000, allow_inf_nan=False)]
ShortName = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS)]
LeaseId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]
JobIdText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]


def _short(error: ValidationError) -> str:
    """The first problems of a validation error on one bounded line (never the whole input)."""
    parts = [
        f"{'.'.join(str(p) for p in e['loc'][:3]) or 'message'}: {e['msg'][:120]}"
        for e in error.errors(include_input=False)[:3]
    ]
    more = error.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def _known_collection_name(cls: type, value: str) -> str:
    if value not in JOB_COLLECTIONS:
        raise ValueError(f"unknown job collection {value[:MAX_NAME_CHARS]!r}")
    return value


class BatchMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    dispatch_id: str = Field(pattern=DISPATCH_ID_PATTERN)
    collection: str
    task: str
    category: Category
    media_name: ShortName
    media_id: int = Field(ge=-(2**63), lt=2**63)
    driver_class: ShortName
    need_login: bool
    need_selenium: bool
    # Its media goes out through proxies: the batch leases one (checked against the store).
    need_proxy: bool = False
    crawl_limit: int = Field(gt=0, le=1_000_000)
    job_ids: list[JobIdText] = Field(min_length=1, max_length=MAX_BATCH_JOBS)
    lease_ids: list[LeaseId] = Field(default_factory=list, max_length=8)
    # Time spent in earlier stages (e.g. admission), carried along so that the crawl's report
    # adds it to the run without a write of its own.
    stages_ms: dict[StageName, StageMs] = Field(default_factory=dict, max_length=MAX_STAGES)
    # When the batch first waited for a resource: its wait bound counts from here, also for the
    # rest of a batch that was interrupted and waits again.
    first_parked_at: datetime | None = None

    _known_collection = field_validator("collection")(_known_collection_name)

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        if value not in ALL_TASKS:
            raise ValueError(f"unknown task {value[:MAX_NAME_CHARS]!r}")
        return value

    @field_validator("first_parked_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("first_parked_at must carry a time zone")
        return value

    @field_validator("job_ids")
    @classmethod
    def _decodable(cls, value: list[str]) -> list[str]:
        for text in value:
            decode_id(text)
        return value

    @classmethod
    def of(cls, batch: Batch, run_id: str, dispatch_id: str, job_ids: list[Any]) -> BatchMessage:
        return cls(
            run_id=run_id,
            dispatch_id=dispatch_id,
            collection=batch.collection,
            task=batch.task,
            category=batch.category,
            media_name=batch.media_name,
            media_id=batch.media_id,
            driver_class=batch.driver_class,
            need_login=batch.need_login,
            need_selenium=batch.need_selenium,
            need_proxy=batch.need_proxy,
            crawl_limit=batch.crawl_limit,
            job_ids=[encode_id(j) for j in job_ids],
        )

    @classmethod
    def parse(cls, payload: Any) -> BatchMessage:
        try:
            return cls.model_validate(payload)
        except ValidationError as e:
            raise BadMessage(f"malformed batch message: {_short(e)}") from e

    def decoded_job_ids(self) -> list[Any]:
        return [decode_id(text) for text in self.job_ids]

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class ReportMessage(BaseModel):
    """A dispatch tells the coordinator it is done: which dispatch, of which run, in which phase.

    It carries no counts: the coordinator reads how the dispatch's jobs ended from the jobs
    themselves, so a forged or replayed report can add nothing the store does not show.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    dispatch_id: str = Field(pattern=DISPATCH_ID_PATTERN)
    collection: str
    phase: Literal["crawl", "admit", "expire"]
    stages_ms: dict[StageName, StageMs] = Field(default_factory=dict, max_length=MAX_STAGES)

    _known_collection = field_validator("collection")(_known_collection_name)

    @property
    def report_key(self) -> str:
        return f"{self.dispatch_id}:{self.phase}"

    @classmethod
    def parse(cls, payload: Any) -> ReportMessage:
        try:
            return cls.model_validate(payload)
        except ValidationError as e:
            raise BadMessage(f"malformed report message: {_short(e)}") from e

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _is_host_key(text: str) -> bool:
    """A pacing key exactly as `host_grouping.pacing_key` writes it (`scheme://host:port`,
    `domain:…`, `address:…`)."""
    return is_pacing_key(text)


class WakeMessage(BaseModel):
    """Pools whose leases were released: the waiting batches that need them get a pass."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pool_keys: list[str] = Field(min_length=1, max_length=8)

    @field_validator("pool_keys")
    @classmethod
    def _known_keys(cls, value: list[str]) -> list[str]:
        for key in value:
            pool, _, media = key.partition(":")
            if pool in ("selenium", "proxy") and not media:
                continue
            if pool == "host" and _is_host_key(media):
                continue
            if pool == "account" and 0 < len(media) <= 100:
                continue
            raise ValueError(f"not a pool key: {key[:100]!r}")
        return value

    @classmethod
    def parse(cls, payload: Any) -> WakeMessage:
        try:
            return cls.model_validate(payload)
        except ValidationError as e:
            raise BadMessage(f"malformed wake message: {_short(e)}") from e

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def admission_route(category: Category, need_proxy: bool = False) -> str:
    """Which stage a batch goes to first: the scarcer pool gates a batch that needs several
    (its gatekeeper leases all of them at once). A proxy need is its media's setting, not a
    category of its own: only a batch that needs nothing else goes to the proxy gatekeeper."""
    if category in (Category.ONLY_LOGIN, Category.SELENIUM_AND_LOGIN):
        return "admit_login"
    if category is Category.ONLY_SELENIUM:
        return "admit_selenium"
    return "admit_proxy" if need_proxy else "crawl"
