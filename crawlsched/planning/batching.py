"""Step 3: group each category's jobs by media and cut them into batches under per-media limits."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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


def _chunks(items: Sequence[DueJob], size: int) -> Iterable[Sequence[DueJob]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def make_batches(
    collection: str,
    task: str,
    categorized: Mapping[Category, Sequence[DueJob]],
    default_limit: int,
) -> list[Batch]:
    """Batches in category order, then media in order of their best job, then priority order.

    Each list arrives sorted by priority (the pipeline's `$sort`); grouping is stable, so the
    order inside every batch is the pipeline's. The limit is the media's `batch_limit` for this
    task, or `default_limit` when the row has none.
    """
    if default_limit < 1:
        raise ValueError(f"default_limit must be >= 1, got {default_limit}")
    batches: list[Batch] = []
    for category in Category:
        by_media: dict[str, list[DueJob]] = {}
        for job in categorized.get(category, ()):
            by_media.setdefault(job.media_name, []).append(job)
        for jobs in by_media.values():
            first = jobs[0]
            limit = first.batch_limit or default_limit
            for chunk in _chunks(jobs, limit):
                batches.append(
                    Batch(
                        collection=collection,
                        task=task,
                        category=category,
                        media_name=first.media_name,
                        media_id=first.media_id,
                        driver_class=first.driver_class,
                        need_login=first.need_login,
                        need_selenium=first.need_selenium,
                        crawl_limit=first.crawl_limit,
                        job_ids=tuple(job.id for job in chunk),
                    )
                )
    return batches
