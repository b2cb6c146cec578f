"""`crawlsched jobs add profile|website`: schedule the tasks of one target, and say their ids,
when they first run, what discovery may reach and which of them wait for a disabled media or
task."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from crawlsched.catalog import DEFAULT_WEBSITE_MEDIA, MAX_DEPTH, MAX_PAGES
from crawlsched.cli import ops
from crawlsched.cli.common import backend, console, labelled, print_json
from crawlsched.cli.text import when

add_app = typer.Typer(help="Schedule the tasks of one profile or website.", no_args_is_help=True)


class Pagination(StrEnum):
    next_link = "next_link"
    page_param = "page_param"


Tasks = Annotated[
    list[str] | None,
    typer.Option("--task", "-t", help="A task to schedule (repeat); default: the kind's defaults."),
]
Interval = Annotated[
    int | None,
    typer.Option("--interval", min=1, help="Seconds between crawls (default: daily)."),
]
Once = Annotated[bool, typer.Option("--once", help="Crawl once instead of on a recurring basis.")]
Validated = Annotated[
    bool, typer.Option("--validated", help="A human validated the target: plan it first.")
]
Certitude = Annotated[
    float, typer.Option("--certitude", min=0.0, max=1.0, help="Priority among unvalidated jobs.")
]
StartAt = Annotated[
    str | None,
    typer.Option("--start-at", help="First run, ISO 8601 (naive means UTC); default: now."),
]
Json = Annotated[bool, typer.Option("--json", help="The API's answer, as one JSON document.")]


def _every(seconds: int | None) -> str:
    if seconds is None:
        return "once"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds % size == 0:
            return f"every {seconds // size}{unit}"
    return f"every {seconds}s"


def _add(ctx: typer.Context, fields: dict[str, Any], as_json: bool) -> None:
    if fields.get("interval_s") is not None and fields.get("one_off"):
        raise typer.BadParameter("--interval and --once exclude each other")
    added = backend(ctx).call(ops.JOB_ADD, **{k: v for k, v in fields.items() if v is not None})
    if as_json:
        print_json(added)
        return
    jobs = added["jobs"]
    first = jobs[0]
    console.print(
        f"{added['media']} {first.get('target')}: {', '.join(j['task'] for j in jobs)} "
        f"({_every(first.get('interval_s'))}, first at "
        f"{when(first.get('execution_date'), ' UTC')[:16]} UTC) in {added['collection']}: "
        f"{added['inserted']} new job(s)"
    )
    console.print("job ids: " + ", ".join(f"{j['job_id']} ({j['task']})" for j in jobs))
    bounds = [
        f"links {first['max_depth']} deep" if "max_depth" in first else "",
        f"at most {first['max_pages']} pages a run" if "max_pages" in first else "",
    ]
    if any(bounds):
        console.print(f"discovery: {', '.join(b for b in bounds if b)}")
    if added["skipped"]:
        console.print(f"{added['skipped']} already scheduled: skipped, not duplicated")
    _warn_if_off(added)


def _warn_if_off(added: dict[str, Any]) -> None:
    media, off = added["media"], added["disabled_tasks"]
    if not added["media_enabled"]:
        message = f"media {media} is disabled; these jobs wait until it is enabled"
    elif off:
        message = f"task(s) {', '.join(off)} disabled for {media}; those jobs wait until enabled"
    else:
        return
    console.print(labelled("note:", "yellow", message))


@add_app.command("profile")
def add_profile(
    ctx: typer.Context,
    media: str = typer.Argument(..., help="Media name, e.g. twitter."),
    handle: str = typer.Argument(..., help="Profile handle, e.g. alice (a leading @ is dropped)."),
    task: Tasks = None,
    url: str | None = typer.Option(None, help="Profile URL, when the media can't build it."),
    interval: Interval = None,
    once: Once = False,
    validated: Validated = False,
    certitude: Certitude = 0.5,
    start_at: StartAt = None,
    as_json: Json = False,
) -> None:
    """Schedule a profile: `profile` plus publication by default (or the --task ones)."""
    fields = {
        "kind": "profile", "media": media, "target": handle, "url": url, "tasks": task,
        "interval_s": interval, "one_off": once, "human_validation": validated,
        "certitude": certitude, "start_at": start_at,
    }  # fmt: skip
    _add(ctx, fields, as_json)


@add_app.command("website")
def add_website(
    ctx: typer.Context,
    url: str = typer.Argument(..., help="The site's http(s) URL."),
    media: str = typer.Option(DEFAULT_WEBSITE_MEDIA, help="Media whose driver crawls it."),
    task: Tasks = None,
    interval: Interval = None,
    once: Once = False,
    validated: Validated = False,
    certitude: Certitude = 0.5,
    start_at: StartAt = None,
    depth: int | None = typer.Option(
        None,
        "--depth",
        min=0,
        max=MAX_DEPTH,
        help="Follow links this deep from the URL (over the media's max_depth).",
    ),
    max_pages: int | None = typer.Option(
        None,
        "--max-pages",
        min=0,
        max=MAX_PAGES,
        help="At most this many pages discovered from the URL per run.",
    ),
    pagination: Pagination | None = typer.Option(
        None, "--pagination", help="How the website driver walks list pages."
    ),
    page_param: str | None = typer.Option(
        None, "--page-param", help="The page number's query parameter (page_param; 'page')."
    ),
    as_json: Json = False,
) -> None:
    """Schedule a website: article by default (or the --task ones)."""
    fields = {
        "kind": "website", "media": media, "target": url, "tasks": task, "interval_s": interval,
        "one_off": once, "human_validation": validated, "certitude": certitude,
        "start_at": start_at, "max_depth": depth, "max_pages": max_pages,
        "pagination": pagination.value if pagination else None, "page_param": page_param,
    }  # fmt: skip
    _add(ctx, fields, as_json)
