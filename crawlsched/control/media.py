"""Media rows of the reference data (driver, discovery bounds, politeness, recrawl, tasks):
listed and shown as a reference file has them, added and changed in the store, where planners
and workers read them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from crawlsched.control.pages import sliced
from crawlsched.drivers import registry
from crawlsched.errors import MediaExists
from crawlsched.flow.job_ops import empty_store_hint
from crawlsched.reference.media_rows import changed_row, stored_row
from crawlsched.runtime import Runtime


def _rows(rt: Runtime) -> list[dict[str, Any]]:
    rows = []
    for media in sorted(rt.reference.media(), key=lambda m: str(m.get("media_name"))):
        tasks = rt.reference.tasks_of(media.get("media_name_id", media["_id"])).values()
        rows.append(stored_row(media, tasks))
    return rows


def page(rt: Runtime, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    """Every media, by name."""
    return sliced(_rows(rt), limit, offset)


def get(rt: Runtime, name: str) -> dict[str, Any]:
    """One media as a reference file row; LookupError naming the known ones."""
    media = rt.reference.media_by_name(name)
    if media is None:
        known = ", ".join(sorted(m["media_name"] for m in rt.reference.media()))
        raise LookupError(f"no media {name!r}; known: {known or empty_store_hint(rt)}")
    return stored_row(
        media, rt.reference.tasks_of(media.get("media_name_id", media["_id"])).values()
    )


def _save(
    rt: Runtime,
    current: dict[str, Any] | None,
    changes: dict[str, Any],
    tasks: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    registry.load_plugins(rt.settings.driver_modules)
    row = changed_row(current, changes, tasks, registry.known())
    rt.reference.save_media(row)
    rt.media(row.name, fresh=True)  # this process's cache (workers re-read theirs)
    return get(rt, row.name)


def add(
    rt: Runtime,
    name: str,
    changes: dict[str, Any] | None = None,
    tasks: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A new media: `changes` are its row's fields (id: default one more than the largest),
    `tasks` its tasks."""
    changes = dict(changes or {})
    if rt.reference.media_by_name(name) is not None:
        raise MediaExists(f"media {name!r} exists: change it with `crawlsched media update`")
    ids = {m.get("media_name_id", m["_id"]) for m in rt.reference.media()}
    if changes.get("id") is None:
        changes["id"] = max((i for i in ids if isinstance(i, int)), default=0) + 1
    elif changes["id"] in ids:
        raise MediaExists(f"id: {changes['id']} is another media's id")
    changes["name"] = name
    return _save(rt, None, changes, tasks or {})


def update(
    rt: Runtime,
    name: str,
    changes: dict[str, Any] | None = None,
    tasks: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Change a media: only what `changes` give (a dict value such as `politeness` is merged);
    each of `tasks` is added or changed."""
    changes = dict(changes or {})
    if changes.get("id") is not None:
        raise ValueError("id: a media's id never changes (it joins its jobs and tasks)")
    return _save(rt, get(rt, name), changes, tasks or {})
