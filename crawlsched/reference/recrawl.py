"""A media's `recrawl` mapping in the reference file: fixed intervals, or adaptive ones within
bounds (the rule is `crawlsched.planning.recrawl`'s)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from crawlsched.jobs_input import MAX_INTERVAL_S
from crawlsched.planning.recrawl import DEFAULT_MAX_INTERVAL_S, DEFAULT_MIN_INTERVAL_S


class RecrawlRow(BaseModel):
    """`recrawl: {adaptive: true, min_interval_s: 3600, max_interval_s: 2592000}`. The method
    and its parameters, left out, come from the settings (CRAWLSCHED_RECRAWL_*); without
    `adaptive: true` the media's jobs keep their configured interval."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    adaptive: bool = False
    min_interval_s: float = Field(
        DEFAULT_MIN_INTERVAL_S, gt=0, le=MAX_INTERVAL_S, allow_inf_nan=False
    )
    max_interval_s: float = Field(
        DEFAULT_MAX_INTERVAL_S, gt=0, le=MAX_INTERVAL_S, allow_inf_nan=False
    )
    inc_rate: float | None = Field(None, gt=0, le=10, allow_inf_nan=False)
    dec_rate: float | None = Field(None, gt=0, lt=1, allow_inf_nan=False)
    jitter: float | None = Field(None, ge=0, lt=1, allow_inf_nan=False)
    method: Literal["estimate", "steps"] | None = None
    interval_per_mean: float | None = Field(None, gt=0, le=100, allow_inf_nan=False)
    memory: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError(f"recrawl must be a mapping, got {type(data).__name__}")
        unknown = sorted(str(k) for k in set(data) - set(cls.model_fields))
        if unknown:
            known = ", ".join(cls.model_fields)
            raise ValueError(f"recrawl: unknown key(s) {unknown}; known: {known}")
        return data

    @model_validator(mode="after")
    def _bounds(self) -> RecrawlRow:
        if self.min_interval_s > self.max_interval_s:
            raise ValueError(
                f"recrawl: min_interval_s ({self.min_interval_s:g}) must be <= max_interval_s "
                f"({self.max_interval_s:g})"
            )
        return self
