"""Hosts as the cluster paces them (politeness): seen, blocked, unblocked, given limits of
their own. A host is named as an operator names it (`example.com`, `127.0.0.1:8001`, an
origin), in the query or the body: its key holds slashes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from crawlsched.api.auth import Admin, Reader
from crawlsched.api.models import Given
from crawlsched.api.paging import Limit, Offset, Page
from crawlsched.api.problems import PROBLEM_RESPONSES
from crawlsched.control import hosts
from crawlsched.control.hosts import MAX_BLOCK_S
from crawlsched.resources.host_rules import MAX_CRAWL_DELAY_S

router = APIRouter(prefix="/v1", tags=["hosts"], responses=PROBLEM_RESPONSES)

# A host name the schema vouches for (a name with a dot, an origin with its scheme when it has
# a port); the routes also take IP addresses and the keys of the other groupings
# (`domain:…`, `address:…`).
_LABELS = r"([A-Za-z0-9-]{1,20}\.){1,3}[A-Za-z][A-Za-z0-9-]{0,20}"
HOST_PATTERN = rf"^({_LABELS}|https?://{_LABELS}(:[1-9][0-9]{{0,3}})?)/?$"
HostName = Annotated[
    str, Field(min_length=1, max_length=300, json_schema_extra={"pattern": HOST_PATTERN})
]
NEW = "The host was never crawled: make it (else 404)."
# Limits of its own, or `clear` alone.
_LIMITS = ("delay_s", "concurrency", "daily_pages")
LIMITS_RULE = {
    "oneOf": [
        {
            "required": ["clear"],
            "properties": {"clear": {"const": True}, **{k: {"not": {}} for k in _LIMITS}},
        },
        {
            "anyOf": [{"required": [k]} for k in _LIMITS],
            "properties": {"clear": {"const": False}},
        },
    ]
}


class Block(BaseModel):
    model_config = ConfigDict(extra="forbid")
    host: HostName
    for_s: float = Field(3600.0, ge=1, le=MAX_BLOCK_S, description="Seconds.")
    reason: str = Field("blocked by an operator", min_length=1, max_length=300)
    new: bool = Field(False, description=NEW)


class Unblock(BaseModel):
    model_config = ConfigDict(extra="forbid")
    host: HostName


class Limits(BaseModel):
    """Limits of the host's own, over its media's and the settings' (or `clear` alone)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=LIMITS_RULE)
    host: HostName
    delay_s: Given[float, Field(ge=0, le=MAX_CRAWL_DELAY_S)] = None
    concurrency: Given[int, Field(ge=1, le=64)] = None
    daily_pages: Given[int, Field(ge=0, le=10_000_000)] = None
    clear: bool = False
    new: bool = Field(False, description=NEW)


@router.get("/hosts", response_model=Page, summary="Every host crawled: limits, holder, block")
def list_hosts(caller: Reader, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    return hosts.page(caller.rt, limit, offset)


@router.get("/hosts/lookup", summary="One host in full, by the name an operator gives it")
def get_host(
    caller: Reader,
    host: Annotated[
        str, Query(min_length=1, max_length=300, json_schema_extra={"pattern": HOST_PATTERN})
    ],
) -> dict[str, Any]:
    return hosts.get(caller.rt, host)


@router.post("/hosts/block", summary="Stop every worker from sending to a host for a while")
def block_host(caller: Admin, body: Block) -> dict[str, Any]:
    return hosts.block(caller.rt, body.host, body.for_s, body.reason, body.new)


@router.post("/hosts/unblock", summary="Lift a host's block and reset its backoff")
def unblock_host(caller: Admin, body: Unblock) -> dict[str, Any]:
    return hosts.unblock(caller.rt, body.host)


@router.put("/hosts/limits", summary="Give a host limits of its own, or forget them")
def set_host_limits(caller: Admin, body: Limits) -> dict[str, Any]:
    fields = body.model_dump()
    return hosts.set_limits(caller.rt, **fields)
