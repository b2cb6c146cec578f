"""The status page at `/`: runs, schedules, pools and activity, refreshed in place; one
page per run at `/status/runs/{run_id}`.

Server-rendered shell plus a few lines of plain JavaScript that fetch `/v1/status` every two
seconds (no build step). It needs a token like the API: the login form keeps it in an
HttpOnly, SameSite=Strict cookie. The cookie counts on GET and HEAD of the API only
(`auth.token_of`): a page on another port of the same host (SameSite does not tell ports
apart) may submit a form to a changing route, but it is refused. An admin's page has buttons
on each run's page, which act through `routes/page_actions.py` only with the page's origin
and CSRF token (`api/page_guard.py`). No page may be framed by another (the buttons could be
clicked through a frame).
"""

from __future__ import annotations

from importlib import resources
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from crawlsched.api import run_ids  # noqa: F401  (registers `{run_id:run_id}`)
from crawlsched.api.auth import COOKIE, Reader, runtime_of
from crawlsched.api.page_guard import csrf_token
from crawlsched.api.problems import PROBLEM_RESPONSES
from crawlsched.control.proxies import proxy_rows
from crawlsched.encoding import plain
from crawlsched.flow import views
from crawlsched.planning.run_control import display_state
from crawlsched.resources import rules

router = APIRouter(tags=["status page"])

RECENT_RUNS = 20
RECENT_EVENTS = 20


def _asset(name: str) -> str:
    return resources.files("crawlsched.api").joinpath("static", name).read_text()


# Every page: never framed by another (clickjacking the buttons), nothing sniffed or sent on.
PAGE_HEADERS = {
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _page(html: str) -> HTMLResponse:
    return HTMLResponse(html, headers=PAGE_HEADERS)


def _login_page(message: str = "") -> HTMLResponse:
    return _page(_asset("login.html").replace("{{message}}", message))


def _shell(name: str, token: str, row: dict[str, Any]) -> HTMLResponse:
    """A page for this session: its role, and for an admin the CSRF token its buttons send
    (hex and a fixed word: nothing of the store is written into the HTML)."""
    admin = row["role"] == "admin"
    return _page(
        _asset(name)
        .replace("{{role}}", "admin" if admin else "read")
        .replace("{{csrf}}", csrf_token(token) if admin else "")
    )


@router.get(
    "/", response_class=HTMLResponse, summary="The status page (a login form without a token)"
)
def status_page(request: Request) -> HTMLResponse:
    token = request.cookies.get(COOKIE)
    row = _page_token_row(request, token)
    if token is None or row is None:
        message = next((m for key, m in LOGIN_MESSAGES.items() if key in request.query_params), "")
        return _login_page(message)
    return _shell("status.html", token, row)


@router.get("/status/runs/{run_id:run_id}", response_class=HTMLResponse, include_in_schema=False)
def run_page(request: Request, run_id: str) -> HTMLResponse:
    """One run's page; the same shell for every run (its script reads the id from the
    address, so no run id is ever written into the HTML)."""
    token = request.cookies.get(COOKIE)
    row = _page_token_row(request, token)
    if token is None or row is None:
        return _login_page()
    return _shell("run.html", token, row)


LOGIN_MESSAGES = {"failed": '<p class="bad">That token is unknown or revoked.</p>'}
# How long the page remembers a token: a read token a month, an admin token a working day.
COOKIE_AGE_S = {"read": 30 * 86400, "admin": 12 * 3600}


def _page_token_row(request: Request, token: str | None) -> dict[str, Any] | None:
    """The row of the token the page is shown with (None: unknown or revoked)."""
    return runtime_of(request).tokens.verify(token) if token else None


@router.post("/login", include_in_schema=False)
async def login(request: Request) -> RedirectResponse:
    # The body guard has already capped the form (CRAWLSCHED_API_MAX_BODY_BYTES).
    form = parse_qs((await request.body()).decode(errors="replace"))
    token = (form.get("token") or [""])[0].strip()
    row = runtime_of(request).tokens.verify(token) if token else None
    if row is None:
        return RedirectResponse("/?failed", status_code=303)
    response = RedirectResponse("/", status_code=303)
    age = COOKIE_AGE_S.get(row["role"], COOKIE_AGE_S["admin"])
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", max_age=age)
    return response


@router.post("/logout", include_in_schema=False)
def logout() -> RedirectResponse:
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(COOKIE)
    return response


def _pool_states(rows: list[dict[str, Any]]) -> dict[str, int]:
    """held / free / cooling / down counts of a pool's resources."""
    counts = {"held": 0, "free": 0, "cooling": 0, "down": 0}
    for row in rows:
        state = row["state"]
        if state in (rules.COOLING,):
            counts["cooling"] += 1
        elif state not in (rules.ACTIVE, rules.UP):
            counts["down"] += 1
        elif row["held"]:
            counts["held"] += 1
        else:
            counts["free"] += 1
    return counts


@router.get(
    "/v1/status",
    tags=["system"],
    responses=PROBLEM_RESPONSES,
    summary="Everything the status page shows, at once",
)
def status(
    caller: Reader,
    empty: Annotated[bool, Query(description="Include runs that planned nothing.")] = False,
) -> dict[str, Any]:
    rt = caller.rt
    runs = []
    for run in rt.runs.recent(RECENT_RUNS, empty=empty):
        waiting = rt.waiting.for_run(run["_id"])
        runs.append(
            {
                "run_id": run["_id"],
                "state": display_state(run),  # `paused` for a paused open run
                "result": run.get("result"),
                "planned": run.get("planned", 0),
                "discovered": run.get("discovered", 0),
                "outstanding": max(run.get("outstanding", 0), 0),
                "counts": run.get("counts", {}),
                "cut": run.get("cut", {}),
                "waiting_batches": len(waiting),
                "starved_batches": len(run.get("shortages", [])),
                "created_at": run.get("created_at"),
            }
        )
    schedules = [
        {
            "schedule_id": s["_id"],
            "state": s.get("state", "active"),
            "next_fire_at": s.get("next_fire_at") if s.get("enabled", True) else None,
            "fired": s.get("fired", 0),
            "missed": s.get("missed", 0),
        }
        for s in rt.schedules.for_owner(None)
    ]
    accounts = views.account_rows(rt)
    nodes = views.node_rows(rt)
    proxies = proxy_rows(rt)
    return plain(
        {
            "now": rt.now(),
            "runs": runs,
            "schedules": schedules,
            "missed": rt.missed_runs.list(None, None, 10),
            "pools": {
                "accounts": {"states": _pool_states(accounts), "rows": accounts},
                "nodes": {"states": _pool_states(nodes), "rows": nodes},
                "proxies": {"states": _pool_states(proxies), "rows": proxies},
                "waiting": views.waiting_groups(rt, rt.waiting.all()),
            },
            "activity": views.activity(rt, None, RECENT_EVENTS),
        }
    )
