"""Bearer tokens: every route but `/health` needs one; changing routes need the admin role.

The token comes from `Authorization: Bearer …` or, for the status page in a browser, from the
`crawlsched_token` cookie its login form sets. A missing, unknown or revoked token is 401; a
read token on an admin route is 403.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from crawlsched.api.problems import ApiProblem
from crawlsched.runtime import Runtime
from crawlsched.store.tokens import allows

COOKIE = "crawlsched_token"
bearer = HTTPBearer(auto_error=False, description="A token from `crawlsched tokens create`.")


@dataclass(frozen=True)
class Caller:
    """Who sent the request, and the runtime to answer it with."""

    rt: Runtime
    token_id: str
    role: str


def runtime_of(request: Request) -> Runtime:
    return request.app.state.runtime


def _token(request: Request, credentials: HTTPAuthorizationCredentials | None) -> str | None:
    if credentials is not None and credentials.scheme.lower() == "bearer":
        return credentials.credentials
    return request.cookies.get(COOKIE)


def _caller(needed: str) -> Any:
    def dependency(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> Caller:
        rt = runtime_of(request)
        token = _token(request, credentials)
        challenge = {"WWW-Authenticate": 'Bearer realm="crawlsched"'}
        if not token:
            raise ApiProblem(401, "a bearer token is required", headers=challenge)
        row = rt.tokens.verify(token)
        if row is None:
            raise ApiProblem(401, "the token is unknown or revoked", headers=challenge)
        if not allows(row["role"], needed):
            raise ApiProblem(403, f"this needs an {needed} token; yours is {row['role']}")
        return Caller(rt, row["_id"], row["role"])

    return dependency


Reader = Annotated[Caller, Depends(_caller("read"))]
Admin = Annotated[Caller, Depends(_caller("admin"))]
