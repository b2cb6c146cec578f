"""emit(rt, name, **fields): record an event in the `activity` feed.

Minimal version (the activity row only); the events module of the runs work also publishes each
event on the RabbitMQ exchange and keeps this signature.
"""

from __future__ import annotations

from typing import Any

from crawlsched.runtime import Runtime


def emit(rt: Runtime, name: str, **fields: Any) -> None:
    """`name` is past tense (ScheduleCreated, RunFinished); fields are small scalars."""
    rt.db.activity.insert_one({"event": name, "at": rt.now(), **fields})
