"""Reference data (models, media, tasks): the packaged default and its validated loader."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from crawlsched.catalog import ALL_TASKS, MAX_BATCH_JOBS
from crawlsched.errors import ReferenceDataError
from crawlsched.reference.recrawl import RecrawlRow


class TaskRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    need_login: bool
    need_selenium: bool
    crawl_limit: int = Field(gt=0)
    batch_limit: int | None = Field(None, gt=0, le=MAX_BATCH_JOBS)
    enabled: bool = True


_HOST = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?")
# Or a whole origin: scheme, host and an optional port (a local site on a loopback port).
_ORIGIN = re.compile(r"https?://[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?(?::[0-9]{1,5})?")


class PolitenessRow(BaseModel):
    """A media's own politeness per host (unset keys: the settings'), for the whole cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    delay_s: float | None = Field(None, ge=0, le=60, allow_inf_nan=False)
    concurrency: int | None = Field(None, ge=1, le=64)
    daily_pages: int | None = Field(None, ge=0)


class ProxyRow(BaseModel):
    """A media that goes out through proxies: every batch leases one, and what a block looks
    like on its site (the proxy then rests, and the domain may move up a tier)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # The proxy group its batches use (unset: any); an account bound to a proxy or a group
    # uses its own binding instead.
    group: str | None = Field(None, min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._-]+$")
    block_statuses: list[int] = Field(default_factory=list, max_length=20)
    block_markers: list[str] = Field(default_factory=list, max_length=20)

    @model_validator(mode="after")
    def _signs(self) -> ProxyRow:
        if any(not 100 <= s <= 599 for s in self.block_statuses):
            raise ValueError("proxy.block_statuses: HTTP status codes (100 to 599)")
        if any(not 1 <= len(m) <= 200 for m in self.block_markers):
            raise ValueError("proxy.block_markers: 1 to 200 characters each")
        return self


class MediaRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # What real sites are called: letters, digits, and . _ - inside (news-site, le.monde).
    name: str = Field(min_length=1, max_length=100, pattern=r"^[a-z0-9](?:[a-z0-9_.-]*[a-z0-9])?$")
    id: int = Field(ge=0)
    enabled: bool = True
    driver_class: str = Field(min_length=1)
    used_tool: str = ""
    url_template: str | None = None
    # Where an account secret of this media may be sent: `host` (https on port 443) or a whole
    # origin `scheme://host:port`; matched exactly, never by suffix.
    secret_hosts: list[str] = Field(default_factory=list, max_length=50)
    # How far a run grows by discovery for this media (unset: the settings' defaults). A crawl
    # stays on the site it started from unless `follow_offsite`, or the host is in `extra_hosts`.
    max_depth: int | None = Field(None, ge=0, le=1000)
    max_pages: int | None = Field(None, ge=0, le=10_000_000)
    follow_offsite: bool = False
    extra_hosts: list[str] = Field(default_factory=list, max_length=50)
    # Per-host politeness for this media's crawls (see `crawlsched hosts` for one host's own).
    politeness: PolitenessRow | None = None
    # How often its recurring jobs are crawled again (unset: each job's own fixed interval).
    recrawl: RecrawlRow | None = None
    # Whether (and how) its batches go out through the proxy pool (unset: from the worker).
    proxy: ProxyRow | None = None
    tasks: dict[str, TaskRow]

    @model_validator(mode="after")
    def _known_tasks(self) -> MediaRow:
        unknown = sorted(set(self.tasks) - set(ALL_TASKS))
        if unknown:
            raise ValueError(f"media {self.name!r}: unknown tasks {unknown}; known: {ALL_TASKS}")
        for host in self.secret_hosts:
            if not _HOST.fullmatch(host) and not _ORIGIN.fullmatch(host):
                raise ValueError(f"media {self.name!r}: secret_hosts: not a host name: {host!r}")
        if self.url_template is not None and "{handle}" not in self.url_template:
            raise ValueError(f"media {self.name!r}: url_template must contain {{handle}}")
        return self


# How a job names what to crawl when it has no `target` field (databases of the old system):
# the first of these fields that holds a non-empty string; failing all of them, its `_id`.
DEFAULT_TARGET_FIELDS: dict[str, list[str]] = {
    "profiles": ["target", "username", "screen_name", "profile_url", "url"],
    "websites": ["target", "url", "link"],
}


class ReferenceData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    models: list[str] = Field(min_length=1)
    media: list[MediaRow]
    target_fields: dict[str, list[str]] = Field(
        default_factory=lambda: {k: list(v) for k, v in DEFAULT_TARGET_FIELDS.items()}
    )

    @model_validator(mode="after")
    def _target_fields(self) -> ReferenceData:
        for collection, fields in self.target_fields.items():
            if collection not in DEFAULT_TARGET_FIELDS:
                raise ValueError(f"target_fields: unknown job collection {collection!r}")
            for field in fields:
                if not field or field.startswith("$") or "." in field:
                    raise ValueError(f"target_fields.{collection}: not a field name: {field!r}")
        return self

    @model_validator(mode="after")
    def _unique(self) -> ReferenceData:
        for what, values in (
            ("media name", [m.name for m in self.media]),
            ("media id", [m.id for m in self.media]),
            ("model", self.models),
        ):
            duplicates = sorted({str(v) for v in values if values.count(v) > 1})
            if duplicates:
                raise ValueError(f"duplicate {what}: {', '.join(duplicates)}")
        return self


def load_reference(path: Path | None = None) -> ReferenceData:
    """Parse and validate a reference file (the packaged default when `path` is None)."""
    try:
        if path is None:
            text = resources.files(__package__).joinpath("default.yaml").read_text()
            source = "packaged default.yaml"
        else:
            text = Path(path).read_text()
            source = str(path)
        raw = yaml.safe_load(text)
    except (OSError, yaml.YAMLError) as e:
        raise ReferenceDataError(f"cannot read reference data from {path}: {e}") from e
    try:
        return ReferenceData.model_validate(raw)
    except ValidationError as e:
        raise ReferenceDataError(f"invalid reference data in {source}:\n{e}") from e
