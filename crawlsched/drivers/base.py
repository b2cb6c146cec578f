"""The driver contract: a class with one method per task it supports.

A driver is named by its media's `driver_class` (see `registry.py`). For each job the crawl
calls the method named after the job's task, `driver.<task>(job, context)`; a driver that
serves every task alike (the generic page drivers) defines `crawl(job, context)` instead.
A method returns nothing: it stores what it found with `context.save(model, docs)` and
registers pages to crawl next with `context.discover(url, task)`. Raising `DriverError` fails
that one job (retried later); `LoginRejected` and `RateLimited` speak of the account, not the
job: the batch's remaining jobs wait for another account.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol


class DriverError(Exception):
    """The crawl of one job failed; the job is retried later (it does not fail the batch)."""


class HttpStatusError(DriverError):
    """The site answered the page with an error status (4xx, 5xx): the page's own failure,
    counted by its status on the run's page."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class TaskNotSupported(DriverError):
    """The media's driver has no method for this task."""


@dataclass(frozen=True)
class CrawlJob:
    job_id: Any
    target: str
    url: str
    task: str
    media_name: str
    crawl_limit: int
    # The whole job document as stored: jobs of the old system carry their own fields, and a
    # discovered child carries the fields its `discover` call gave (e.g. which page it is).
    document: Mapping[str, Any] = field(default_factory=dict)
    depth: int = 0  # 0 for a planned job, parent + 1 for a discovered one


@dataclass(frozen=True)
class Account:
    """The leased account. `secret` is the credential: never log it, never put it in a URL."""

    username: str
    secret: str = field(repr=False)


# A task method takes the job and its `context.CrawlContext` (typed loosely here: the context
# module builds on this one, not the other way round).
TaskMethod = Callable[[CrawlJob, Any], None]


class Driver(Protocol):
    """Documentation only: a driver has `<task>(job, context)` methods, or one `crawl`.

    A driver whose methods keep nothing between calls and reach the network through
    `context.http` only may say so with a class attribute `jobs_at_once = True`: a batch
    with no account and no browser then crawls several of its jobs at once
    (`CRAWLSCHED_CRAWL_LANES`), each with a context of its own (`CrawlContext.fork`)."""


def jobs_at_once(driver: object) -> bool:
    """Whether the driver declared that several of its jobs may run at once."""
    return getattr(type(driver), "jobs_at_once", False) is True


def task_method(driver: object, task: str) -> TaskMethod:
    """The driver's method for `task`: its own `<task>` method, else its generic `crawl`."""
    method = getattr(driver, task, None) or getattr(driver, "crawl", None)
    if not callable(method):
        raise TaskNotSupported(f"driver {type(driver).__name__} has no method for task {task!r}")
    return method


class LoginRejected(DriverError):
    """The site refused the leased account's login: the account is banned until re-enabled.

    The batch stops and its remaining jobs wait for another account; they have not failed.
    """


class RateLimited(DriverError):
    """The site rate-limited the leased account until `until` (an aware datetime).

    With `task_only` (the site limits each endpoint on its own, as its rate-limit headers
    say), the account is locked for this batch's task only and still serves its other tasks;
    otherwise it cools down for all of them. Either way the batch's remaining jobs wait for
    another account; they have not failed.
    """

    def __init__(
        self, until: datetime, message: str = "rate-limited", task_only: bool = False
    ) -> None:
        super().__init__(f"{message} until {until.isoformat()}")
        self.until = until
        self.task_only = task_only
