"""Task history: one row per job execution, and the three forms of correction (one row, a list
of rows, every row with an outcome), each kept in the row's audit trail."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema
from starlette.convertors import Convertor, register_url_convertor

from crawlsched.api.auth import Admin, Reader
from crawlsched.api.paging import Limit, Offset, Page
from crawlsched.api.problems import PROBLEM_RESPONSES
from crawlsched.control import history
from crawlsched.encoding import plain
from crawlsched.planning.outcomes import all_outcomes
from crawlsched.store.history import row_id

router = APIRouter(prefix="/v1", tags=["history"], responses=PROBLEM_RESPONSES)

Filter = Annotated[str | None, Query(max_length=300)]
ROW_ID = "[0-9a-fA-F]{24}"


class RowIdConvertor(Convertor):
    """A history row's id in a path: so `/v1/history/corrections` is never read as a row."""

    regex = ROW_ID

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("row_id", RowIdConvertor())
RowId = Annotated[str, Path(pattern=f"^{ROW_ID}$", description="A history row's id.")]
# Optional fields whose schema admits no null: a null is read as not given.
Outcome = Annotated[str, Field(json_schema_extra={"enum": all_outcomes()})] | SkipJsonSchema[None]
RowIds = Annotated[
    list[Annotated[str, Field(pattern=f"^{ROW_ID}$")]], Field(min_length=1, max_length=10_000)
]
Text = Annotated[str, Field(min_length=1, max_length=2000)] | SkipJsonSchema[None]


# At least one of the three (an empty one counts as not given); none of them null.
_SOME_CHANGE = {"anyOf": [{"required": [k]} for k in ("outcome", "error", "note")]}


class Changes(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_SOME_CHANGE)
    outcome: Outcome = None
    error: Text = None
    note: Text = None
    reason: str = Field(
        ..., min_length=1, max_length=2000, pattern=r"\S", description="Why: kept in the audit."
    )

    def changes(self) -> dict[str, Any]:
        found = {k: v for k in ("outcome", "error", "note") if (v := getattr(self, k))}
        if not found:
            raise ValueError("nothing to correct: give outcome, error or note")
        if not self.reason.strip():
            raise ValueError("reason must say why")
        return found


class Correction(Changes):
    """Rows by id (`rows`), or every row whose outcome is `status`."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [
                _SOME_CHANGE,
                {"oneOf": [{"required": ["rows"]}, {"required": ["status"]}]},
            ]
        },
    )
    rows: RowIds | SkipJsonSchema[None] = None
    status: Outcome = None

    @model_validator(mode="after")
    def _one_form(self) -> Correction:
        if (self.rows is None) == (self.status is None):
            raise ValueError("give rows (one or more ids) or status, not both and not neither")
        return self


@router.get(
    "/history",
    response_model=Page,
    summary="Task history, newest first (GetTaskHistoryBySchedulerId)",
)
def list_history(
    caller: Reader,
    limit: Limit = 100,
    offset: Offset = 0,
    schedule_id: Filter = None,
    run_id: Filter = None,
    job_id: Filter = None,
    outcome: Filter = None,
) -> dict[str, Any]:
    return history.page(caller.rt, limit, offset, schedule_id, run_id, job_id, outcome)


@router.get("/history/{row:row_id}", summary="One history row (GetTaskHistoryInfo)")
def get_row(caller: Reader, row: RowId) -> dict[str, Any]:
    doc = caller.rt.history.get(row_id(row))
    if doc is None:
        raise LookupError(f"no history row {row!r}")
    return plain(doc)


@router.patch("/history/{row:row_id}", summary="Correct one row (UpdateTaskHistory)")
def correct_row(caller: Admin, row: RowId, body: Changes) -> dict[str, Any]:
    return history.correct(caller.rt, body.reason, rows=[row], **body.changes())


@router.post(
    "/history/corrections",
    summary="Correct rows by id or every row with an outcome "
    "(UpdateTaskHistoryByBatch, UpdateAllTaskHistoryByStatus)",
)
def correct_rows(caller: Admin, body: Correction) -> dict[str, Any]:
    return history.correct(
        caller.rt, body.reason, rows=body.rows, status=body.status, **body.changes()
    )
