"""Step 3: group each category's jobs by media and cut them into batches under per-media limits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crawlsched.planning.due import Category, DueJob


@dataclass(frozen=True)
class Batch:
    """Jobs of one collection, task, media and category that one crawl message will carry."""

    collection: str
    task: str
    category: Category
    media_name: str
    media_id: int
    driver_class: str
    need_login: bool
    need_selenium: bool
    crawl_limit: int
    job_ids: tuple[Any, ...]
    need_proxy: bool = False


class BatchCutter:
    """Cuts batches out of due jobs as they stream in priority order.

    A batch is complete as soon as its (category, media) bucket reaches the media's limit for
    the task (`batch_limit`, else `default_limit`), so at most one partial batch per bucket is
    held: memory does not grow with the number of jobs. `flush()` hands over the partial ones,
    in the order their buckets were opened.
    """

    def __init__(self, collection: str, task: str, default_limit: int) -> None:
        if default_limit < 1:
            raise ValueError(f"default_limit must be >= 1, got {default_limit}")
        self.collection = collection
        self.task = task
        self.default_limit = default_limit
        self._buckets: dict[tuple[Category, str], list[DueJob]] = {}

    def add(self, job: DueJob) -> Batch | None:
        key = (job.category, job.media_name)
        bucket = self._buckets.setdefault(key, [])
        bucket.append(job)
        if len(bucket) >= (bucket[0].batch_limit or self.default_limit):
            del self._buckets[key]
            return self._batch(bucket)
        return None

    def flush(self) -> list[Batch]:
        batches = [self._batch(bucket) for bucket in self._buckets.values()]
        self._buckets.clear()
        return batches

    def _batch(self, jobs: Sequence[DueJob]) -> Batch:
        first = jobs[0]
        return Batch(
            collection=self.collection,
            task=self.task,
            category=first.category,
            media_name=first.media_name,
            media_id=first.media_id,
            driver_class=first.driver_class,
            need_login=first.need_login,
            need_selenium=first.need_selenium,
            crawl_limit=first.crawl_limit,
            job_ids=tuple(job.id for job in jobs),
            need_proxy=first.need_proxy,
        )


def make_batches(
    collection: str,
    task: str,
    categorized: Mapping[Category, Sequence[DueJob]],
    default_limit: int,
) -> list[Batch]:
    """Batches in category order; within a (category, media), in priority order, cut full.

    Each list arrives sorted by priority (the pipeline's `$sort`); cutting is stable, so the
    order inside every batch is the pipeline's.
    """
    cutter = BatchCutter(collection, task, default_limit)
    batches: list[Batch] = []
    for category in Category:
        for job in categorized.get(category, ()):
            if (batch := cutter.add(job)) is not None:
                batches.append(batch)
        batches.extend(cutter.flush())
    return batches
