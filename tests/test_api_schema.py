"""schemathesis runs the API's OpenAPI schema against the live server (uvicorn on loopback):
no 5xx answer, and every answer matches the schema (status, content type, body).

Bounded: a few examples per operation, no time deadline (the suite's hypothesis profile).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from crawlsched.api import create_app
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from tests.support.api import ApiServer, serving

# What the answers must keep. (schemathesis's negative-data checks expect unknown query
# parameters to be refused; like most HTTP APIs this one ignores them, on purpose.)
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]
# The schema only: an app over an embedded store never opened (no route runs here).
schema = schemathesis.openapi.from_dict(
    create_app(Runtime(Settings(mongo_url="mongomock://schema-only"))).openapi()
)


@pytest.fixture(scope="module")
def live() -> Iterator[ApiServer]:
    with serving("mongomock://api-schema") as server:
        yield server


@schema.parametrize()
@settings(max_examples=12, suppress_health_check=list(HealthCheck))
def test_the_live_api_keeps_its_schema(case, live):
    # The command-line route runs whatever command it is given: not a place for random argv.
    if case.path == "/v1/cli":
        case.body = {"argv": ["stats", "--json"]}
    response = case.call(base_url=live.url, headers={"Authorization": f"Bearer {live.admin_token}"})
    assert response.status_code < 500, (case.method, case.path, response.text[:500])
    case.validate_response(response, checks=CHECKS)
