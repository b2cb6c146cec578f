"""Pieces of request models shared by the routes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema


class _Given:
    """`Given[T, Field(...)]`: an optional field, T with its constraints or None (read as not
    given), whose schema admits no null (what the schema accepts, the route accepts)."""

    def __class_getitem__(cls, params: tuple[Any, Any]) -> Any:
        kind, field = params
        return Annotated[kind, field] | SkipJsonSchema[None]


Given = _Given


class RecrawlView(BaseModel):
    """How often a job is crawled again, and the evidence behind it (`planning.recrawl`)."""

    mode: Literal["fixed", "adaptive", "once"] = Field(
        description="`fixed`: every configured interval; `adaptive`: at the pace its page "
        "changes (its media's `recrawl` policy); `once`: a one-off job."
    )
    method: Literal["estimate", "steps"] | None = Field(
        None,
        description="Adaptive: how the interval follows the crawls (`estimate`: a multiple of "
        "the page's estimated time between changes; `steps`: shorter after a change, longer "
        "after none).",
    )
    estimated_change_every_s: float | None = Field(
        None,
        description="Adaptive `estimate`: the page's estimated mean time between changes, from "
        "what its crawls found (the interval is the media's `interval_per_mean` times it, "
        "within the bounds).",
    )
    configured_interval_s: float | None = Field(description="The job's own `interval_s`.")
    current_interval_s: float | None = Field(description="The interval it is crawled at now.")
    min_interval_s: float | None = Field(description="Adaptive: the shortest interval.")
    max_interval_s: float | None = Field(description="Adaptive: the longest interval.")
    visits: int = Field(description="Successful crawls counted since adaptive recrawl began.")
    changes: int = Field(description="Of those, how many found an item new or changed.")
    last_items: dict[str, int] = Field(description="The last crawl's new / changed / unchanged.")
    updated_at: datetime | None = Field(description="When the interval last changed.")
    next_at: datetime | None = Field(description="The job's next execution date.")


class JobView(BaseModel):
    """One job: its public fields, and how often it is crawled again."""

    # The job's stored fields (`job_ops.PUBLIC_FIELDS`) come as the store holds them: a job
    # of the old system may type them otherwise.
    model_config = ConfigDict(extra="allow")
    job_id: str
    collection: str
    state: str
    recrawl: RecrawlView


class JobStates(BaseModel):
    """A job collection's jobs per state (`catalog.by_state_name`); seed markers not counted."""

    pending: int = Field(description="Waiting to be planned when due.")
    running: int = Field(description="Planned and not ended yet.")
    failed: int = Field(description="Last crawl failed; planned again when due.")
    done: int = Field(description="A one-off job that ended.")
    other: int = Field(description="A state code no state has (a job of the old system).")


class StatsView(BaseModel):
    """Counts across the system (`flow.views.gather_stats`); `crawlsched store stats --json`."""

    runs_by_state: dict[str, int]
    runs_by_result: dict[str, int]
    jobs_by_state: dict[str, JobStates] = Field(description="Per job collection.")
    pages_seen: dict[str, int] = Field(
        description="Per job collection: planned pages runs remember having crawled (markers "
        "that keep a page found again from being planned twice; not jobs)."
    )
    executions_by_outcome: dict[str, int]
    waiting_batches: int
    webhooks_by_state: dict[str, int]
    events_by_name: dict[str, int]
