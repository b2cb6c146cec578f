"""The payloads actors exchange: ids and routing facts only, never secrets or whole documents."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from crawlsched.catalog import ALL_TASKS, JOB_COLLECTIONS
from crawlsched.errors import CrawlschedError
from crawlsched.ids import decode_id, encode_id
from crawlsched.planning.batching import Batch
from crawlsched.planning.due import Category


class BadMessage(CrawlschedError, ValueError):
    """A message whose arguments do not parse: never retried, dead-lettered at once."""


class BatchMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str = Field(min_length=1)
    dispatch_id: str = Field(min_length=1)
    collection: str
    task: str
    category: Category
    media_name: str = Field(min_length=1)
    media_id: int
    driver_class: str = Field(min_length=1)
    need_login: bool
    need_selenium: bool
    crawl_limit: int = Field(gt=0)
    job_ids: list[str] = Field(min_length=1)
    lease_ids: list[str] = Field(default_factory=list)
    # Time spent in earlier stages (e.g. admission), carried along so that the crawl's report
    # adds it to the run without a write of its own.
    stages_ms: dict[str, float] = Field(default_factory=dict)
    # When the batch first waited for a resource: its wait bound counts from here, also for the
    # rest of a batch that was interrupted and waits again.
    first_parked_at: datetime | None = None

    @field_validator("collection")
    @classmethod
    def _known_collection(cls, value: str) -> str:
        if value not in JOB_COLLECTIONS:
            raise ValueError(f"unknown job collection {value!r}")
        return value

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        if value not in ALL_TASKS:
            raise ValueError(f"unknown task {value!r}")
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
            crawl_limit=batch.crawl_limit,
            job_ids=[encode_id(j) for j in job_ids],
        )

    @classmethod
    def parse(cls, payload: Any) -> BatchMessage:
        try:
            return cls.model_validate(payload)
        except ValidationError as e:
            raise BadMessage(f"malformed batch message: {e}") from e

    def decoded_job_ids(self) -> list[Any]:
        return [decode_id(text) for text in self.job_ids]

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class ReportMessage(BaseModel):
    """What a dispatch tells the coordinator: how its jobs ended, and what it discovered."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str = Field(min_length=1)
    report_key: str = Field(min_length=1)
    counts: dict[str, int]
    discovered: int = Field(0, ge=0)
    stages_ms: dict[str, float] = Field(default_factory=dict)

    @field_validator("counts")
    @classmethod
    def _non_negative(cls, value: dict[str, int]) -> dict[str, int]:
        if any(n < 0 for n in value.values()):
            raise ValueError("counts must be >= 0")
        return value

    @classmethod
    def parse(cls, payload: Any) -> ReportMessage:
        try:
            return cls.model_validate(payload)
        except ValidationError as e:
            raise BadMessage(f"malformed report message: {e}") from e

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class WakeMessage(BaseModel):
    """Pools whose leases were released: the waiting batches that need them get a pass."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pool_keys: list[str] = Field(min_length=1, max_length=8)

    @field_validator("pool_keys")
    @classmethod
    def _known_keys(cls, value: list[str]) -> list[str]:
        for key in value:
            pool, _, media = key.partition(":")
            if pool == "selenium" and not media:
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
            raise BadMessage(f"malformed wake message: {e}") from e

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def admission_route(category: Category) -> str:
    """Which stage a batch goes to first: the scarcer pool gates a batch that needs both."""
    if category in (Category.ONLY_LOGIN, Category.SELENIUM_AND_LOGIN):
        return "admit_login"
    if category is Category.ONLY_SELENIUM:
        return "admit_selenium"
    return "crawl"
