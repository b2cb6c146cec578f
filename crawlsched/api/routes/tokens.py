"""API tokens: created (shown once, only a hash kept), listed, revoked. For admin tokens."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from crawlsched.api.auth import Admin
from crawlsched.api.paging import Limit, Offset, Page
from crawlsched.api.problems import PROBLEM_RESPONSES
from crawlsched.control import tokens

router = APIRouter(prefix="/v1", tags=["tokens"], responses=PROBLEM_RESPONSES)


class NewToken(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["read", "admin"] = "read"
    name: str = Field(..., min_length=1, max_length=100, pattern=r"\S")


@router.get("/tokens", response_model=Page, summary="Tokens and their roles (never the tokens)")
def list_tokens(caller: Admin, limit: Limit = 100, offset: Offset = 0) -> dict[str, Any]:
    return tokens.page(caller.rt, limit, offset)


@router.post("/tokens", status_code=201, summary="A new token, shown this once")
def create_token(caller: Admin, body: NewToken) -> dict[str, Any]:
    return tokens.create(caller.rt, body.role, body.name)


@router.post("/tokens/{token_id}/revoke", summary="Revoke a token")
def revoke_token(caller: Admin, token_id: str) -> dict[str, Any]:
    return tokens.revoke(caller.rt, token_id)
