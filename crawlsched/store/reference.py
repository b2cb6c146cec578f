"""Load reference data (models, media, tasks) and read it back for planning and crawling."""

from __future__ import annotations

from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, UpdateOne

from crawlsched.reference import DEFAULT_TARGET_FIELDS, MediaRow, ReferenceData
from crawlsched.store.counting import CountingDatabase
from crawlsched.store.pipeline import MEDIA_COLLECTION, TASKS_COLLECTION


class MongoReferenceStore:
    def __init__(self, db: CountingDatabase) -> None:
        self._db = db

    def create_indexes(self) -> None:
        self._db.core_models.create_index([("name", ASCENDING)], unique=True, name="name")
        self._db[MEDIA_COLLECTION].create_index(
            [("media_name", ASCENDING)], unique=True, name="media_name"
        )
        self._db[TASKS_COLLECTION].create_index(
            [("media_name_id", ASCENDING), ("name", ASCENDING)], unique=True, name="media_task"
        )

    def load(self, reference: ReferenceData) -> dict[str, int]:
        """Upsert every row by its natural key; ids of existing rows never change."""
        models = [
            UpdateOne(
                {"name": name}, {"$setOnInsert": {"_id": ObjectId(), "name": name}}, upsert=True
            )
            for name in reference.models
        ]
        media = []
        tasks = []
        for m in reference.media:
            row_op, task_ops = _media_ops(m)
            media.append(row_op)
            tasks.extend(task_ops)
        _bulk(self._db.core_models, models)
        _bulk(self._db[MEDIA_COLLECTION], media)
        _bulk(self._db[TASKS_COLLECTION], tasks)
        self._db.core_settings.update_one(
            {"_id": "target_fields"},
            {"$set": {"fields": reference.target_fields}},
            upsert=True,
        )
        return {"models": len(models), "media": len(media), "tasks": len(tasks)}

    def save_media(self, row: MediaRow) -> None:
        """Add or change one media and its task rows, as `load` does for a reference file."""
        row_op, task_ops = _media_ops(row)
        _bulk(self._db[MEDIA_COLLECTION], [row_op])
        _bulk(self._db[TASKS_COLLECTION], task_ops)

    def target_fields(self) -> dict[str, list[str]]:
        """Which fields name a job's target, per job collection (see the reference file)."""
        doc = self._db.core_settings.find_one({"_id": "target_fields"})
        stored = (doc or {}).get("fields") or {}
        return {c: list(stored.get(c) or d) for c, d in DEFAULT_TARGET_FIELDS.items()}

    def model_ids(self) -> dict[str, Any]:
        """Step 1: the id of every data model, by name (results are tagged with them)."""
        return {doc["name"]: doc["_id"] for doc in self._db.core_models.find({}, {"name": 1})}

    def media(self) -> list[dict[str, Any]]:
        return list(self._db[MEDIA_COLLECTION].find({}))

    def media_by_name(self, name: str) -> dict[str, Any] | None:
        return self._db[MEDIA_COLLECTION].find_one({"media_name": name})

    def tasks_of(self, media_name_id: Any) -> dict[str, dict[str, Any]]:
        return {
            row["name"]: row
            for row in self._db[TASKS_COLLECTION].find({"media_name_id": media_name_id})
        }

    def set_enabled(self, media_name: str, enabled: bool, task: str | None = None) -> int:
        media = self.media_by_name(media_name)
        if media is None:
            return 0
        if task is None:
            coll, flt = self._db[MEDIA_COLLECTION], {"_id": media["_id"]}
        else:
            media_name_id = media.get("media_name_id", media["_id"])
            coll, flt = self._db[TASKS_COLLECTION], {"media_name_id": media_name_id, "name": task}
        return coll.update_one(flt, {"$set": {"enabled": enabled}}).matched_count


def _media_ops(m: MediaRow) -> tuple[UpdateOne, list[UpdateOne]]:
    """The upserts of one media row and its task rows, by id (ids never change)."""
    row = UpdateOne(
        {"_id": m.id},
        {
            "$set": {
                "media_name": m.name,
                # The old system joins tasks by this field, not by `_id`.
                "media_name_id": m.id,
                "enabled": m.enabled,
                "driver_class": m.driver_class,
                "used_tool": m.used_tool,
                "url_template": m.url_template,
                "secret_hosts": list(m.secret_hosts),
                "max_depth": m.max_depth,
                "max_pages": m.max_pages,
                "follow_offsite": m.follow_offsite,
                "extra_hosts": list(m.extra_hosts),
                "politeness": (
                    m.politeness.model_dump(exclude_none=True) if m.politeness else None
                ),
                "recrawl": m.recrawl.model_dump() if m.recrawl else None,
                "proxy": m.proxy.model_dump() if m.proxy else None,
            }
        },
        upsert=True,
    )
    tasks = [
        UpdateOne(
            {"_id": f"{m.id}:{name}"},
            {"$set": {"media_name_id": m.id, "name": name, **task.model_dump()}},
            upsert=True,
        )
        for name, task in m.tasks.items()
    ]
    return row, tasks


def _bulk(collection: Any, ops: list[Any]) -> None:
    """A bulk write of `ops` (none: nothing to send; MongoDB refuses an empty bulk)."""
    if ops:
        collection.bulk_write(ops, ordered=False)
