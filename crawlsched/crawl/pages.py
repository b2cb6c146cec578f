"""A page as the frontier hands it around: its job document, its URL, and the key of the host
its requests are paced under (`politeness.pacer.ClusterHostPacer.key_of`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from crawlsched.planning.due import derive_target


@dataclass(frozen=True, eq=False)
class Page:
    """Compared by identity: two pages are the same page only if they are one object (a job
    document read twice is two pages until the frontier says otherwise)."""

    doc: dict[str, Any]
    url: str
    host: str  # "" for a URL no request could go to: its crawl says so

    @property
    def job_id(self) -> Any:
        return self.doc["_id"]


def job_url(job: Mapping[str, Any], target: str, media: Mapping[str, Any] | None) -> str:
    """The URL a job's crawl starts from: its own, else its media's template over the target."""
    if isinstance(job.get("url"), str) and job["url"]:
        return job["url"]
    template = (media or {}).get("url_template")
    if template:
        return template.format(handle=target)
    return target


def locator(
    media: Mapping[str, Any] | None,
    target_fields: tuple[str, ...],
    key_of: Callable[[str], str],
) -> Callable[[dict[str, Any]], Page]:
    """Makes the `Page` of a job document of one media and collection."""

    def locate(doc: dict[str, Any]) -> Page:
        url = job_url(doc, derive_target(doc, target_fields), media)
        try:
            host = key_of(url)
        except (ValueError, OSError):
            host = ""  # not a URL a request could go to: its crawl will say so
        return Page(doc, url, host)

    return locate
