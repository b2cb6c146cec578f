"""The proxy pool: proxies listed (never their passwords), added, enabled, disabled and
removed; each domain's proxy tier; an account bound to a proxy or a group of proxies."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field, SecretStr
from starlette.convertors import Convertor, register_url_convertor

from crawlsched.api.auth import Admin, Reader
from crawlsched.api.models import Given
from crawlsched.api.paging import Limit, Offset, Page
from crawlsched.api.problems import PROBLEM_RESPONSES
from crawlsched.control import proxies

router = APIRouter(prefix="/v1", tags=["resources"], responses=PROBLEM_RESPONSES)

# What the schema vouches for; the routes take any string and answer the inventory's own
# message for what it refuses (a name with a space, credentials in a URL: 400).
NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
PROXY_URL = (
    r"^(https?|socks5)://([A-Za-z0-9-]{1,20}\.){0,3}[A-Za-z0-9][A-Za-z0-9-]{0,20}"
    r":[1-9][0-9]{0,3}/?$"
)
Name = Annotated[str, Field(min_length=1, max_length=100, json_schema_extra={"pattern": NAME})]


class ProxyNameConvertor(Convertor):
    """`{name:proxy_name}`: one path segment, but not `tiers` alone, so that DELETE
    /v1/proxies/tiers is "GET only here" (405), not the removal of a proxy named so."""

    regex = r"(?!tiers$)[^/]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("proxy_name", ProxyNameConvertor())
ProxyName = Annotated[str, Path(max_length=100, json_schema_extra={"pattern": NAME})]


SECRET = "Kept encrypted; never answered back."


class NewProxy(BaseModel):
    """A proxy, or new settings for one (`crawlsched proxies add`). Its credentials are
    `username` and `password` (write-only, kept encrypted), never in `url`."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "dependentRequired": {"username": ["password"], "password": ["username"]}
        },
    )
    name: Name
    url: str = Field(
        ...,
        min_length=1,
        max_length=2000,
        description="scheme://host:port (http, https or socks5), without credentials.",
        json_schema_extra={"pattern": PROXY_URL},
    )
    group: Name = "default"
    tier: int = Field(0, ge=0, le=9, description="0 the cheapest; a blocked domain moves up.")
    max_concurrent: int = Field(1, ge=1, le=1000, description="Batches through it at once.")
    username: Given[str, Field(min_length=1, max_length=200)] = None
    password: Given[SecretStr, Field(min_length=1, max_length=10_000, description=SECRET)] = None


class ProxyEnabled(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(..., description="true also ends a failed proxy's rest.")


class AccountBinding(BaseModel):
    """One proxy, or one group of proxies, or neither (unbound)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"not": {"required": ["proxy", "group"]}}
    )
    proxy: Given[Name, Field(description="Always this proxy.")] = None
    group: Given[Name, Field(description="A proxy of this group, kept while it works.")] = None


@router.get("/proxies", response_model=Page, summary="Proxies with their state and load")
def list_proxies(caller: Reader, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    return proxies.proxies(caller.rt, limit, offset)


@router.post("/proxies", summary="Add a proxy, or change its address, group, tier or password")
def add_proxy(caller: Admin, body: NewProxy) -> dict[str, Any]:
    fields = body.model_dump()
    fields["password"] = body.password.get_secret_value() if body.password else None
    return proxies.add_proxy(caller.rt, **fields)


@router.get("/proxies/tiers", summary="Each domain's proxy tier")
def proxy_tiers(caller: Reader) -> dict[str, Any]:
    return proxies.tiers(caller.rt)


@router.post("/proxies/{name}/state", summary="Enable (ending its rest) or disable a proxy")
def proxy_state(caller: Admin, name: ProxyName, body: ProxyEnabled) -> dict[str, Any]:
    return proxies.proxy_state_set(caller.rt, name, body.enabled)


@router.delete("/proxies/{name:proxy_name}", summary="Forget a proxy (its accounts are unbound)")
def remove_proxy(caller: Admin, name: ProxyName) -> dict[str, Any]:
    return proxies.remove_proxy(caller.rt, name)


@router.post(
    "/accounts/{media}/{username}/binding",
    summary="Bind an account to a proxy or a group of proxies (neither: unbind it)",
)
def bind_account(caller: Admin, media: str, username: str, body: AccountBinding) -> dict[str, Any]:
    return proxies.bind_account(caller.rt, media, username, body.proxy, body.group)
