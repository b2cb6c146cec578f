"""A due job as the planning pipeline returns it, parsed and checked before it is batched."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from crawlsched.catalog import MAX_BATCH_JOBS
from crawlsched.errors import BadJobDocument


class Category(StrEnum):
    """The four lists of the pipeline, named as in the original system."""

    ONLY_LOGIN = "need_only_login"
    ONLY_SELENIUM = "need_only_selenium"
    SELENIUM_AND_LOGIN = "need_selenium_and_login"
    NEITHER = "without_selenium_and_login"

    @classmethod
    def of(cls, need_login: bool, need_selenium: bool) -> Category:
        if need_login and need_selenium:
            return cls.SELENIUM_AND_LOGIN
        if need_login:
            return cls.ONLY_LOGIN
        if need_selenium:
            return cls.ONLY_SELENIUM
        return cls.NEITHER


@dataclass(frozen=True)
class DueJob:
    id: Any
    target: str
    media_name: str
    media_id: int
    driver_class: str
    used_tool: str
    need_login: bool
    need_selenium: bool
    crawl_limit: int
    batch_limit: int | None
    need_proxy: bool = False

    @property
    def category(self) -> Category:
        return Category.of(self.need_login, self.need_selenium)


def _require(doc: Mapping[str, Any], field: str, kind: type | tuple[type, ...], where: str) -> Any:
    if field not in doc or doc[field] is None:
        raise BadJobDocument(doc.get("_id"), f"{where}: missing {field}")
    value = doc[field]
    # bool is an int subclass: a flag of True must not pass as a count, nor 1 as a flag.
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise BadJobDocument(doc.get("_id"), f"{where}: {field} must not be a boolean")
    if not isinstance(value, kind):
        raise BadJobDocument(
            doc.get("_id"), f"{where}: {field} has type {type(value).__name__}, expected {kind}"
        )
    return value


def derive_target(doc: Mapping[str, Any], fields: Sequence[str] = ("target",)) -> str:
    """What a job crawls: the first of `fields` holding a non-empty string, else its `_id`.

    Jobs we write carry `target`; jobs of the old system name it otherwise (a username, a
    URL), and the reference file lists which fields to look at, per job collection.
    """
    for field in fields:
        value = doc.get(field)
        if isinstance(value, str) and value.strip():
            return value
    return str(doc.get("_id"))


def parse_due_job(doc: Mapping[str, Any], target_fields: Sequence[str] = ("target",)) -> DueJob:
    """Check one pipeline row; raise BadJobDocument with an operator-readable reason."""
    if doc.get("target") is not None and not isinstance(doc["target"], str):
        raise BadJobDocument(
            doc.get("_id"), f"job: target has type {type(doc['target']).__name__}, expected str"
        )
    if isinstance(doc.get("target"), str) and not doc["target"].strip():
        raise BadJobDocument(doc.get("_id"), "job: target is empty")
    target = derive_target(doc, ("target", *target_fields))
    media = str(doc.get("media_name", "?"))
    row = f"core_tasks row ({media}, {doc.get('task', '?')})"
    crawl_limit = _require(doc, "crawl_limit", int, row)
    if crawl_limit <= 0:
        raise BadJobDocument(doc.get("_id"), f"{row}: crawl_limit must be > 0")
    batch_limit = doc.get("batch_limit")
    if batch_limit is not None and (
        isinstance(batch_limit, bool)
        or not isinstance(batch_limit, int)
        or not 0 < batch_limit <= MAX_BATCH_JOBS
    ):
        raise BadJobDocument(
            doc.get("_id"), f"{row}: batch_limit must be an integer from 1 to {MAX_BATCH_JOBS}"
        )
    return DueJob(
        id=doc["_id"],
        target=target,
        media_name=_require(doc, "media_name", str, "childs_socialmedia row"),
        media_id=_require(doc, "media_id", int, "childs_socialmedia row"),
        driver_class=_require(doc, "driver_class", str, f"childs_socialmedia row ({media})"),
        used_tool=str(doc.get("used_tool") or ""),
        need_login=_require(doc, "need_login", bool, row),
        need_selenium=_require(doc, "need_selenium", bool, row),
        crawl_limit=crawl_limit,
        batch_limit=batch_limit,
        need_proxy=bool(doc.get("media_proxy")),
    )
