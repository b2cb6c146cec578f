"""When schedules fire and how their runs' jobs are planned, leased, retried and stopped."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field, field_validator

from crawlsched.catalog import MAX_BATCH_JOBS


class RunSettings(BaseModel):
    """Part of `Settings` (CRAWLSCHED_* from the environment): see the README's settings table."""

    clock_interval_s: float = Field(
        5.0, gt=0, le=3600, allow_inf_nan=False, description="Seconds between two clock ticks."
    )
    misfire_grace_s: float | None = Field(
        None,
        gt=0,
        le=86400,
        allow_inf_nan=False,
        description="A fire time seen later than this is a misfire (its schedule's misfire "
        "policy decides); unset: three clock intervals.",
    )
    schedule_horizon_days: float = Field(
        3.0, gt=0, le=31, allow_inf_nan=False, description="Default horizon of upcoming runs."
    )
    default_batch_limit: int = Field(
        100, ge=1, le=MAX_BATCH_JOBS, description="Jobs per batch when core_tasks has none."
    )
    dispatch_lease_s: float = Field(
        900.0,
        gt=0,
        le=7 * 86400,
        allow_inf_nan=False,
        description="How long a claimed batch may stay running before it is reclaimed.",
    )
    resource_lease_s: float = Field(
        900.0,
        gt=0,
        le=7 * 86400,
        allow_inf_nan=False,
        description="TTL of an account or Selenium-node lease.",
    )
    crawl_time_limit_s: float = Field(
        600.0,
        gt=0,
        le=86400,
        allow_inf_nan=False,
        description="dramatiq TimeLimit for one crawl message (one batch).",
    )
    max_attempts: int = Field(
        5, ge=1, le=1000, description="Failed attempts after which a job is exhausted."
    )
    backoff_base_s: float = Field(
        60.0,
        gt=0,
        le=7 * 86400,
        allow_inf_nan=False,
        description="First retry delay; doubles per attempt.",
    )
    backoff_max_s: float = Field(
        6 * 3600.0,
        gt=0,
        le=30 * 86400,
        allow_inf_nan=False,
        description="Ceiling of the retry delay.",
    )
    run_attempts: int = Field(
        3,
        ge=1,
        le=100,
        description="Tries one run gives a page whose crawl the machinery failed (a worker "
        "killed, a dispatch reclaimed); past them the page is given up and the run ends "
        "incomplete. Not counted in max_attempts: it is not the page's failure.",
    )
    redo_backoff_s: float = Field(
        5.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="Wait before a run tries such a page again; doubles per try, at most 300 s.",
    )
    max_claim_per_sweep: int = Field(
        0,
        ge=0,
        le=10_000_000,
        description="At most this many jobs claimed by one firing of a schedule (0: no cap); "
        "the rest stay due for the next one.",
    )
    admission_wait_s: float | None = Field(
        None,
        gt=0,
        le=7 * 86400,
        allow_inf_nan=False,
        description="How long a batch may wait for an account or node before it is starved; "
        "unset: its schedule's interval.",
    )
    stop_check_s: float = Field(
        1.0,
        gt=0,
        le=60,
        allow_inf_nan=False,
        description="A crawl re-reads whether its run was stopped at most this often (seconds).",
    )

    @property
    def misfire_grace(self) -> timedelta:
        return timedelta(seconds=self.misfire_grace_s or 3 * self.clock_interval_s)

    @field_validator("backoff_max_s")
    @classmethod
    def _ceiling_above_base(cls, value: float, info) -> float:
        base = info.data.get("backoff_base_s")
        if base is not None and value < base:
            raise ValueError(f"backoff_max_s ({value}) must be >= backoff_base_s ({base})")
        return value
