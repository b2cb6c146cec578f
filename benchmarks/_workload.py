"""Shared workload for the benchmarks: 20 media over the 4 categories, N due jobs in `profiles`.

Not a benchmark itself (the leading underscore); imported by bench_planner.py and
bench_pipeline.py, which run with benchmarks/ as sys.path[0].
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # crawlsched is installed editable; tests.support is not
    sys.path.insert(0, str(REPO_ROOT))

from bson import ObjectId  # noqa: E402

from crawlsched.reference import ReferenceData  # noqa: E402

# (need_login, need_selenium) for each of the four categories, 5 media each.
CATEGORY_FLAGS = {
    "need_only_login": (True, False),
    "need_only_selenium": (False, True),
    "need_selenium_and_login": (True, True),
    "without_selenium_and_login": (False, False),
}
MEDIA_PER_CATEGORY = 5
TASKS = ("profile", "publication")
BATCH_LIMIT = 100


def reference(driver_class: str = "noop", batch_limit: int = BATCH_LIMIT) -> ReferenceData:
    """20 media, 5 per category; tasks profile + publication with the category's flags."""
    media = []
    media_id = 1
    for category, (login, selenium) in CATEGORY_FLAGS.items():
        short = "".join(word[0] for word in category.split("_"))
        for i in range(MEDIA_PER_CATEGORY):
            row = {
                "need_login": login,
                "need_selenium": selenium,
                "crawl_limit": 10,
                "batch_limit": batch_limit,
            }
            media.append(
                {
                    "name": f"bench_{short}_{i}",
                    "id": media_id,
                    "driver_class": driver_class,
                    "used_tool": "none",
                    "url_template": "https://example.invalid/{handle}",
                    "tasks": {task: dict(row) for task in TASKS},
                }
            )
            media_id += 1
    return ReferenceData.model_validate(
        {"models": ["profile", "publication", "comment", "friend", "story", "article"],
         "media": media}
    )  # fmt: skip


def job_docs(n: int, ref: ReferenceData, now: datetime, seed: int = 42) -> list[dict[str, Any]]:
    """N due jobs spread round-robin over media and the two tasks, random priority fields."""
    rng = random.Random(seed)
    pairs = [((m.id, m.name), task) for m in ref.media for task in TASKS]
    docs = []
    for i in range(n):
        (media_id, media_name), task = pairs[i % len(pairs)]
        docs.append(
            {
                "_id": ObjectId(),
                "target": f"handle_{i}",
                "task": task,
                "media_name": media_name,
                "media_name_id": media_id,
                "enabled": True,
                "state": 1,
                "attempt_count": 0,
                "exhausted": False,
                "execution_date": now - timedelta(seconds=rng.randint(1, 3600)),
                "human_validation": rng.random() < 0.2,
                "certitude": round(rng.random(), 3),
                "modified_at": now - timedelta(seconds=rng.randint(0, 30 * 86400)),
                "interval_s": 300,
            }
        )
    return docs


def utc_now() -> datetime:
    return datetime.now(UTC)


def median(values: list[float]) -> float:
    return statistics.median(values)


def print_table(title: str, rows: list[tuple[str, Any]]) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n== {title} ==")
    for key, value in rows:
        if isinstance(value, float):
            value = f"{value:,.4f}" if abs(value) < 10 else f"{value:,.1f}"
        print(f"  {key:<{width}}  {value}")


def print_json(figures: dict[str, Any]) -> None:
    print(json.dumps(figures, sort_keys=True, default=str))
