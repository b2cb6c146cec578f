"""Media rows of the reference data: listed, shown as a reference file has them, added and
changed (checked by the same model as the reference file; a bad field is a 400 naming it)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field

from crawlsched.api.auth import Admin, Reader
from crawlsched.api.paging import Limit, Offset, Page
from crawlsched.api.problems import PROBLEM_RESPONSES
from crawlsched.control import media

router = APIRouter(prefix="/v1", tags=["media"], responses=PROBLEM_RESPONSES)

MediaName = Annotated[str, Path(max_length=100, description="A media's name, e.g. web.")]
Fields = Annotated[
    dict[str, Any],
    Field(
        max_length=30,
        description="Reference-file fields of the media row (driver_class, max_depth, "
        "politeness, recrawl, …); a mapping such as politeness is merged into the stored one.",
    ),
]
Tasks = Annotated[
    dict[str, dict[str, Any]],
    Field(max_length=20, description="Tasks to add or change: need_login, crawl_limit, …"),
]


class NewMedia(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., min_length=1, max_length=100)
    changes: Fields = Field(default_factory=dict)
    tasks: Tasks = Field(default_factory=dict)


class MediaChanges(BaseModel):
    model_config = ConfigDict(extra="forbid")
    changes: Fields = Field(default_factory=dict)
    tasks: Tasks = Field(default_factory=dict)


@router.get("/media", response_model=Page, summary="Every media: driver, bounds, tasks")
def list_media(caller: Reader, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    return media.page(caller.rt, limit, offset)


@router.get("/media/{name}", summary="One media, as a reference file row")
def get_media(caller: Reader, name: MediaName) -> dict[str, Any]:
    return media.get(caller.rt, name)


@router.post("/media", status_code=201, summary="Add a media (a taken name or id is 409)")
def add_media(caller: Admin, body: NewMedia) -> dict[str, Any]:
    return media.add(caller.rt, body.name, body.changes, body.tasks)


@router.patch("/media/{name}", summary="Change a media: only what is given")
def update_media(caller: Admin, name: MediaName, body: MediaChanges) -> dict[str, Any]:
    return media.update(caller.rt, name, body.changes, body.tasks)
