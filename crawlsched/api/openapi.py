"""The API's OpenAPI schema: FastAPI's, plus what it cannot say by itself.

- **Links** between operations (OpenAPI 3.1 `links`): the schedule a `POST /v1/schedules`
  made is the one to read, change, pause, run and delete; the run a `POST /v1/runs` started
  is the one to read and stop; the jobs a `POST /v1/jobs` added are the ones to read.
- **The bearer scheme** on every operation whose route asks for a caller (`auth.needs_token`).
- **The reference data** the store holds: `POST /v1/jobs` takes one of its media, the kind of
  target that media crawls and the tasks it offers for it. Read at each request of the schema
  (a changed reference shows at once); when the store cannot be read, the schema says only
  what the route's model says.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from crawlsched.api.auth import BEARER_SCHEME, needs_token
from crawlsched.catalog import TARGET_KINDS
from crawlsched.jobs_input import WEBSITE_ONLY
from crawlsched.logs import get_logger
from crawlsched.runtime import Runtime

log = get_logger(__name__)

# An http(s) URL naming its host (not an IP literal): what the target rules take without
# knowing the allowed networks. The routes also take IP literals an allowed network admits.
NAMED_WEB_URL = (
    r"^https?://([A-Za-z0-9-]{1,20}\.){1,3}[A-Za-z][A-Za-z0-9-]{0,20}(:[1-9][0-9]{0,3})?"
    r"(/[!-~]{0,100})?$"
)
# A notice target the schema can vouch for: Apprise's JSON service on a host name Apprise
# takes (labels start with a letter, no hyphen at either end). The routes
# take any URL Apprise accepts (tgram://, slack://, mailto://, …).
NAMED_JSON_NOTICE = (
    r"^jsons?://([A-Za-z][A-Za-z0-9]{0,19}(-[A-Za-z0-9]{1,10})?\.){1,3}[A-Za-z][A-Za-z0-9]{1,20}"
    r"(:[1-9][0-9]{0,3})?(/[A-Za-z0-9._~-]{0,30}){0,4}$"
)
# A handle: visible ASCII but '/' and '@' (the route also takes other letters, not spaces).
PROFILE_HANDLE = r"^@?[!-.0-?A-~]{1,100}$"

SCHEDULE = {"schedule_id": "$response.body#/_id"}
RUN = {"run_id": "$response.body#/run_id"}
JOB = {"collection": "$response.body#/collection", "job_id": "$response.body#/jobs/0/job_id"}

# (path, method, status) of the producer → link name → (path, method of the consumer, params).
LINKS: dict[tuple[str, str, str], dict[str, tuple[str, str, dict[str, str]]]] = {
    ("/v1/schedules", "post", "201"): {
        "GetSchedule": ("/v1/schedules/{schedule_id}", "get", SCHEDULE),
        "ChangeSchedule": ("/v1/schedules/{schedule_id}", "patch", SCHEDULE),
        "PauseSchedule": ("/v1/schedules/{schedule_id}/pause", "post", SCHEDULE),
        "UnpauseSchedule": ("/v1/schedules/{schedule_id}/unpause", "post", SCHEDULE),
        "StopSchedule": ("/v1/schedules/{schedule_id}/stop", "post", SCHEDULE),
        "DeleteSchedule": ("/v1/schedules/{schedule_id}", "delete", SCHEDULE),
        "ScheduleUpcoming": ("/v1/schedules/{schedule_id}/upcoming", "get", SCHEDULE),
        "ScheduleMissed": ("/v1/schedules/{schedule_id}/missed", "get", SCHEDULE),
        "RunSchedule": ("/v1/runs", "post", {}),
    },
    ("/v1/schedules/{schedule_id}/pause", "post", "200"): {
        "UnpausePaused": ("/v1/schedules/{schedule_id}/unpause", "post", SCHEDULE),
    },
    ("/v1/runs", "post", "202"): {
        "GetRun": ("/v1/runs/{run_id}", "get", RUN),
        "StopRun": ("/v1/runs/{run_id}/stop", "post", RUN),
        "StopRunChildren": ("/v1/runs/{run_id}/children/stop", "post", RUN),
        "RunChildren": ("/v1/runs/{run_id}/children", "get", RUN),
        "RunHistory": ("/v1/runs/{run_id}/history", "get", RUN),
    },
    ("/v1/jobs", "post", "201"): {
        "GetJob": ("/v1/jobs/{collection}/{job_id}", "get", JOB),
        "ChangeJobMeta": ("/v1/jobs/{collection}/{job_id}/meta", "patch", JOB),
        "ListJobs": ("/v1/jobs/{collection}", "get", {"collection": JOB["collection"]}),
    },
}
# Links that fill a request body rather than parameters.
LINK_BODIES = {"RunSchedule": {"schedule_id": "$response.body#/_id"}}


def _with_links(schema: dict[str, Any]) -> None:
    paths = schema["paths"]
    for (path, method, status), links in LINKS.items():
        response = paths[path][method]["responses"].setdefault(status, {"description": "Done"})
        response["links"] = {}
        for name, (target, target_method, parameters) in links.items():
            link: dict[str, Any] = {"operationId": paths[target][target_method]["operationId"]}
            if parameters:
                link["parameters"] = parameters
            if name in LINK_BODIES:
                link["requestBody"] = LINK_BODIES[name]
            response["links"][name] = link


def target_variants(runtime: Runtime) -> list[dict[str, Any]] | None:
    """One schema per media and kind of target: its name, and the tasks it offers for that
    kind (a profile: `profile` and at least one more). None when the store cannot be read."""
    try:
        media = runtime.reference.media()
        offered = {
            row["media_name"]: set(runtime.reference.tasks_of(row.get("media_name_id", row["_id"])))
            for row in media
        }
    except Exception as e:  # the schema is still served, without the reference's detail
        log.warning("openapi_reference_unread", error=f"{type(e).__name__}: {e}")
        return None
    variants = []
    for name, tasks in sorted(offered.items()):
        for kind in TARGET_KINDS.values():
            mine = [t for t in kind.tasks if t in tasks]
            extra = [t for t in mine if t != "profile"]
            if kind.name == "profile" and ("profile" not in mine or not extra):
                continue
            if kind.name == "website" and not mine:
                continue
            tasks_schema: dict[str, Any] = {"type": "array", "items": {"enum": mine}}
            if kind.name == "profile":
                tasks_schema["contains"] = {"enum": extra}
            else:
                tasks_schema["minItems"] = 1
            variants.append(
                {
                    "properties": {
                        "kind": {"const": kind.name},
                        "media": {"const": name},
                        "tasks": tasks_schema,
                        "target": {
                            "type": "string",
                            "pattern": NAMED_WEB_URL if kind.name == "website" else PROFILE_HANDLE,
                        },
                        # `url`: a profile's address the media's template cannot build.
                        "url": {"type": "string", "pattern": NAMED_WEB_URL}
                        if kind.name == "profile"
                        else {"not": {}},
                        # A website's own bounds and pagination: a profile takes none.
                        **(
                            {name: {"not": {}} for name in WEBSITE_ONLY}
                            if kind.name == "profile"
                            else {}
                        ),
                    },
                    "required": ["kind", "media", "tasks"],
                }
            )
    return variants


def _with_bearer(schema: dict[str, Any], routers: Sequence[APIRouter]) -> None:
    name = next(iter(BEARER_SCHEME))
    secured = False
    for route in (route for router in routers for route in router.routes):
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        if needs_token(route):
            for method in route.methods:
                operation = schema["paths"].get(route.path_format, {}).get(method.lower())
                if operation is not None:
                    operation["security"] = [{name: []}]
                    secured = True
    if secured:
        schema.setdefault("components", {}).setdefault("securitySchemes", {}).update(BEARER_SCHEME)


def install(app: FastAPI, runtime: Runtime, routers: Sequence[APIRouter]) -> None:
    """`app.openapi()` answers the schema above; `routers` are those the app includes."""
    base: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not base:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            _with_links(schema)
            _with_bearer(schema, routers)
            base.update(schema)
        schema = copy.deepcopy(base)
        variants = target_variants(runtime)
        if variants:
            new_target = schema["components"]["schemas"]["NewTarget"]
            new_target["oneOf"] = variants
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
