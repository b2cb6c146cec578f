"""A process's cache of the reference data (media rows, their tasks, model ids, target
fields), so that planning and crawling do not read the store for each job."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawlsched.store.reference import MongoReferenceStore

# How long a process keeps a media row before reading it again (a change reaches every worker
# within this long).
MEDIA_CACHE_S = 30.0


class ReferenceCache:
    """Mixed into `Runtime`, which gives `reference` (the store of reference data)."""

    reference: MongoReferenceStore

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic  # the runtime's clock (`environment`)
        self._model_ids: dict[str, Any] | None = None
        self._media: dict[str, dict[str, Any]] = {}
        self._media_read_at: dict[str, float] = {}
        self._target_fields: dict[str, list[str]] | None = None

    def model_ids(self) -> dict[str, Any]:
        # Reference data changes only with init-db; a worker restart picks up a change.
        if self._model_ids is None:
            self._model_ids = self.reference.model_ids()
        return self._model_ids

    def target_fields(self, collection: str) -> list[str]:
        """Fields that name a job's target in `collection` (reference data; cached)."""
        if self._target_fields is None:
            self._target_fields = self.reference.target_fields()
        return self._target_fields.get(collection, [])

    def media_tasks(self, name: str) -> list[str]:
        """The tasks a media has rows for (cached like the media row)."""
        media = self.media(name)
        if media is None:
            return []
        if "_tasks" not in media:
            media["_tasks"] = sorted(
                self.reference.tasks_of(media.get("media_name_id", media["_id"]))
            )
        return media["_tasks"]

    def media_task(self, name: str, task: str) -> dict[str, Any] | None:
        """The media's row for `task` (need flags, limits), cached like the media row."""
        media = self.media(name)
        if media is None:
            return None
        if "_task_rows" not in media:
            media["_task_rows"] = self.reference.tasks_of(media.get("media_name_id", media["_id"]))
        return media["_task_rows"].get(task)

    def media(self, name: str, fresh: bool = False) -> dict[str, Any] | None:
        """The media row named `name`, cached for the process; `fresh` reads it again (the
        reference may have been reloaded since)."""
        read_at = self._media_read_at.get(name)
        if fresh or read_at is None or self._monotonic() - read_at > MEDIA_CACHE_S:
            # Read again now and then: `crawlsched media update` changes a row that worker
            # processes elsewhere have cached.
            self._media.pop(name, None)
        if name not in self._media:
            doc = self.reference.media_by_name(name)
            if doc is None:
                return None
            self._media[name] = doc
            self._media_read_at[name] = self._monotonic()
        return self._media[name]
