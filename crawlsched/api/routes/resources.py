"""The resource pools: capacity and what waits for what; login accounts (never their secrets)
and Selenium nodes, listed, added and steered."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from crawlsched.api.auth import Admin, Reader
from crawlsched.api.models import Given
from crawlsched.api.openapi import NAMED_WEB_URL
from crawlsched.api.paging import Limit, Offset, Page
from crawlsched.api.problems import PROBLEM_RESPONSES
from crawlsched.control import pools

router = APIRouter(prefix="/v1", tags=["resources"], responses=PROBLEM_RESPONSES)

Name = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00/]+$")]
WEEK_S = 7 * 86400


class NewAccount(BaseModel):
    """An account of a media, or new secret and limits for one (`crawlsched accounts add`)."""

    # A rate limit is uses per window: both or neither.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "dependentRequired": {"rate_uses": ["rate_window_s"], "rate_window_s": ["rate_uses"]}
        },
    )
    media: Name
    username: Name
    secret: SecretStr = Field(..., min_length=1, max_length=10_000, description="Kept encrypted.")
    max_concurrent: int = Field(1, ge=1, le=100, description="Batches using it at once.")
    cooldown_s: float = Field(0.0, ge=0, le=WEEK_S, description="Rest after each use.")
    rate_uses: Given[int, Field(ge=1, le=1_000_000)] = None
    rate_window_s: Given[float, Field(gt=0, le=WEEK_S)] = None


class AccountState(BaseModel):
    model_config = ConfigDict(extra="forbid")
    state: Literal["banned", "disabled", "active"]
    reason: Given[str, Field(max_length=300)] = None


class NewNode(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(
        ...,
        min_length=1,
        max_length=2000,
        description="A Grid 4 or a chromedriver, http(s).",
        json_schema_extra={"pattern": NAMED_WEB_URL},
    )
    slots: Given[int, Field(ge=1, le=1000, description="Browsers at once (chromedriver).")] = None


class NodeDrain(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(..., min_length=1, max_length=2000)
    draining: bool = Field(True, description="false: the node takes leases again.")


@router.get("/pools", summary="Capacity and use of each pool, and what waits for what")
def overview(caller: Reader) -> dict[str, Any]:
    return pools.overview(caller.rt)


@router.get("/accounts", response_model=Page, summary="Accounts, without their secrets")
def accounts(
    caller: Reader,
    limit: Limit = 100,
    offset: Offset = 0,
    media: Annotated[str | None, Query(max_length=100)] = None,
) -> dict[str, Any]:
    return pools.accounts(caller.rt, limit, offset, media)


@router.post("/accounts", summary="Add an account, or change its secret and limits")
def add_account(caller: Admin, body: NewAccount) -> dict[str, Any]:
    fields = body.model_dump()
    fields["secret"] = body.secret.get_secret_value()
    return pools.add_account(caller.rt, **fields)


@router.post("/accounts/{media}/{username}/state", summary="Ban, disable or enable an account")
def account_state(caller: Admin, media: str, username: str, body: AccountState) -> dict[str, Any]:
    return pools.account_state(caller.rt, media, username, body.state, body.reason)


@router.get("/nodes", response_model=Page, summary="Selenium nodes with their state and load")
def nodes(caller: Reader, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    return pools.nodes(caller.rt, limit, offset)


@router.post(
    "/nodes",
    summary="Probe a node's /status and add it (only where a crawl may go: "
    "CRAWLSCHED_TARGET_ALLOW_NETWORKS)",
)
def add_node(caller: Admin, body: NewNode) -> dict[str, Any]:
    return pools.add_node(caller.rt, body.url, body.slots, guarded=True)


@router.post("/nodes/drain", summary="No new leases on a node (or take leases again)")
def drain_node(caller: Admin, body: NodeDrain) -> dict[str, Any]:
    return pools.drain_node(caller.rt, body.url, body.draining)


@router.delete("/nodes", summary="Forget a node (batches on it wait again)")
def remove_node(
    caller: Admin, url: Annotated[str, Query(min_length=1, max_length=2000)]
) -> dict[str, Any]:
    return pools.remove_node(caller.rt, url)
