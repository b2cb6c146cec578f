"""schemathesis runs the API's OpenAPI schema against a live `crawlsched standalone` (its own
process, its own data directory):

- every operation, 50 examples each (schema-valid and schema-breaking requests): no 5xx, and
  every answer as documented (status, content type, body); a request the schema calls valid
  is never refused as malformed (400 or 422);
- its links, statefully: a schedule made, then read, changed, paused, run and deleted; the run
  started read and stopped; the jobs added read and changed;
- every path answers a method it does not serve with 405 and an `Allow` naming exactly the
  methods the schema lists for it (OPTIONS included).

Bounded: examples per operation and steps are counted, no time deadline (the suite's
hypothesis profile), derandomized so that a run repeats the last.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis import checks

from crawlsched.api import create_app
from crawlsched.schedules.spec import SCHEDULE_ID
from crawlsched.store.client import drop_embedded
from tests.support.api import seeded_runtime
from tests.support.standalone import Standalone, standalone_env

# What the answers must keep. (schemathesis's negative-data checks expect unknown query
# parameters to be refused; like most HTTP APIs this one ignores them, on purpose.)
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.positive_data_acceptance,
]
EXAMPLES = 50
# A scenario runs against a server that keeps what earlier ones made: replaying one (to shrink
# it) meets another state, which Hypothesis would call flaky. So: generate only, and a failure
# is reported as found.
STATEFUL = settings(
    max_examples=15,
    stateful_step_count=6,
    deadline=None,
    derandomize=True,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)
# The schema as the server builds it, over the packaged reference data (which media, kinds
# and tasks `POST /v1/jobs` takes). `test_the_live_schema_is_the_one_tested` checks that the
# standalone serves this very schema.
RAW_SCHEMA = create_app(seeded_runtime("mongomock://api-schema-only")).openapi()
drop_embedded("mongomock://api-schema-only")
schema = schemathesis.openapi.from_dict(copy.deepcopy(RAW_SCHEMA))  # it changes what it reads


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    data = Path(tmp_path_factory.mktemp("api-schema")) / "data"
    # Slow clock: the default sweeps stay quiet; a run is started only by the tests' requests.
    with Standalone(standalone_env(data, CRAWLSCHED_CLOCK_INTERVAL_S="60")):
        yield json.loads((data / "api.json").read_text())


def _fuzz_dump() -> bytes:
    """A dump of one empty collection nothing else uses, as `store load` takes it."""
    import tempfile

    from crawlsched.archives import tar_chunks

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "crawlsched").mkdir()
        (Path(folder) / "crawlsched" / "fuzz_probe.bson").write_bytes(b"")
        return b"".join(tar_chunks(Path(folder)))


FUZZ_DUMP = _fuzz_dump()


def prepared(case: Any) -> None:
    """What no schema can say, supplied by the test:
    - an `Idempotency-Key` names one request: the same key with another body is refused by
      design (422), so each request gets its own;
    - a one-time trigger (`at`) must be in the future, which a schema cannot compare.
    And each new schedule gets an id of its own, so that an answer does not depend on what
    earlier examples made (a taken id is 409): a scenario replayed meets the same answers.

    What would change the reference data the schema is built from (`test_the_live_schema_is_
    the_one_tested` compares them) is kept from doing so: the reference is loaded as the server
    has it (no body), a new media is named as one that exists (409), a change goes to a media
    there is not (404). A load is sent a dump (of one collection of its own, harmless): random
    bytes are no archive, which only the server can tell."""
    if case.path == "/v1/reference":
        case.body = {}
    if case.path == "/v1/media" and case.method == "POST" and isinstance(case.body, dict):
        case.body["name"] = "web"
    if case.path == "/v1/media/{name}":
        case.path_parameters = {"name": "no-such-media"}
    if case.path == "/v1/store/load":
        case.body = FUZZ_DUMP
    if case.headers and "Idempotency-Key" in case.headers:
        case.headers["Idempotency-Key"] = uuid.uuid4().hex
    body = case.body
    new_id = body.get("id") if case.path == "/v1/schedules" and isinstance(body, dict) else None
    if isinstance(new_id, str) and SCHEDULE_ID.match(new_id):
        body["id"] = f"{body['id'][:80]}-{uuid.uuid4().hex[:12]}"
    if isinstance(body, dict) and isinstance(body.get("at"), str):
        try:
            at = datetime.fromisoformat(body["at"])
        except ValueError:
            return
        if at.tzinfo is not None and at <= datetime.now(UTC) + timedelta(minutes=5):
            body["at"] = (datetime.now(UTC) + timedelta(days=1)).isoformat()


# A value for each path parameter, to name a concrete path of every route.
PATH_VALUES = {
    "schedule_id": "s", "run_id": "r", "collection": "websites", "job_id": "str:j",
    "row": "0" * 24, "media": "m", "username": "u", "name": "n", "model": "article",
    "token_id": "t",
}  # fmt: skip


def _auth(live: dict[str, str]) -> dict[str, str]:
    return {"Authorization": f"Bearer {live['token']}"}


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_the_live_api_keeps_its_schema(case, live):
    prepared(case)
    response = case.call(base_url=live["url"], headers=_auth(live))
    assert response.status_code < 500, (case.method, case.path, response.text[:500])
    case.validate_response(response, checks=CHECKS)


def test_the_live_api_keeps_its_links(live):
    class Workflow(schema.as_state_machine()):
        def before_call(self, case: Any) -> None:
            prepared(case)

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": live["url"], "headers": _auth(live)}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            assert response.status_code < 500, (
                case.method,
                case.path,
                case.body,
                response.text[:300],
            )
            case.validate_response(response, checks=CHECKS)

    Workflow.run(settings=STATEFUL)


def test_the_live_schema_is_the_one_tested(live):
    served = httpx.get(f"{live['url']}/openapi.json", timeout=30).json()
    assert served == RAW_SCHEMA


def test_every_path_names_its_methods_in_allow(live):
    methods = {"get", "put", "post", "patch", "delete", "head", "options", "trace"}
    with httpx.Client(base_url=live["url"], headers=_auth(live), timeout=30) as client:
        for path, item in RAW_SCHEMA["paths"].items():
            declared = {m.upper() for m in item if m in methods}
            concrete = path.format(**PATH_VALUES)
            for method in ["OPTIONS", *sorted({"PUT", "TRACE", "DELETE"} - declared)]:
                response = client.request(method, concrete)
                assert response.status_code == 405, (method, path, response.status_code)
                allow = {m.strip() for m in response.headers["allow"].split(",")}
                assert allow - {"HEAD"} == declared, (method, path, allow)


def test_the_schema_declares_a_token_exactly_where_the_server_asks_for_one(live):
    """The bearer scheme is added to the schema from the routes' own dependencies: judged by
    the live server, every operation it secures answers 401 without a token, and every one
    it leaves open answers without one."""
    secured, open_ = [], []
    with httpx.Client(base_url=live["url"], timeout=30) as client:
        for path, item in RAW_SCHEMA["paths"].items():
            concrete = path.format(**PATH_VALUES)
            for method, operation in item.items():
                body = {"json": {}} if method in {"post", "put", "patch"} else {}
                status = client.request(method.upper(), concrete, **body).status_code
                if operation.get("security") == [{"HTTPBearer": []}]:
                    secured.append(path)
                    assert status == 401, (method, path, status)
                else:
                    open_.append(path)
                    assert status != 401, (method, path, status)
    assert "HTTPBearer" in RAW_SCHEMA["components"]["securitySchemes"]
    assert sorted(open_) == ["/", "/health"] and len(secured) >= 30
