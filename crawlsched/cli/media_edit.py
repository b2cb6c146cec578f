"""`crawlsched media add | update`: the options a media row is set with, turned into changes
of its reference row (checked by `crawlsched.reference.media_rows`) and saved in the store."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import typer

from crawlsched.cli import ops
from crawlsched.cli.common import backend, bad_input, console


class Recrawl(StrEnum):
    adaptive = "adaptive"
    fixed = "fixed"


def _save(ctx: typer.Context, name: str, existing: bool, changes: dict, tasks: dict) -> None:
    given = {k: v for k, v in changes.items() if v is not None}
    if existing:
        row = backend(ctx).call(ops.MEDIA_UPDATE, name=name, changes=given, tasks=tasks)
    else:
        row = backend(ctx).call(ops.MEDIA_ADD, name=name, changes=given, tasks=tasks)
    console.print(
        f"media {row['name']} ({'updated' if existing else 'added'}): id {row['id']}, driver "
        f"{row['driver_class']}, tasks {', '.join(sorted(row['tasks']))}"
    )


def _changes(**given: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The row changes and the task changes the options ask for."""
    tasks = given.pop("task") or []
    task_fields = {
        "crawl_limit": given.pop("crawl_limit"),
        "batch_limit": given.pop("batch_limit"),
        "need_login": given.pop("need_login"),
        "need_selenium": given.pop("need_selenium"),
    }
    if not tasks and any(v is not None for v in task_fields.values()):
        bad_input("--crawl-limit, --batch-limit, --need-login, --need-selenium: give --task too")
    politeness = {
        "delay_s": given.pop("delay"),
        "concurrency": given.pop("concurrency"),
        "daily_pages": given.pop("daily_pages"),
    }
    recrawl = given.pop("recrawl")
    interval = {
        "min_interval_s": given.pop("min_interval"),
        "max_interval_s": given.pop("max_interval"),
    }
    changes: dict[str, Any] = {
        "driver_class": given.pop("driver"),
        "max_depth": given.pop("max_depth"),
        "max_pages": given.pop("max_pages"),
        "follow_offsite": given.pop("follow_offsite"),
        "extra_hosts": given.pop("extra_host") or None,
        "secret_hosts": given.pop("secret_host") or None,
        "url_template": given.pop("url_template"),
        "enabled": given.pop("enabled"),
        "id": given.pop("media_id", None),
    }
    if any(v is not None for v in politeness.values()):
        changes["politeness"] = {k: v for k, v in politeness.items() if v is not None}
    if recrawl is not None or any(v is not None for v in interval.values()):
        changes["recrawl"] = {"adaptive": recrawl == Recrawl.adaptive} if recrawl else {}
        changes["recrawl"].update({k: float(v) for k, v in interval.items() if v is not None})
    return changes, {task: task_fields for task in tasks}


_OPTION_NAMES = frozenset(
    [
        "driver",
        "max_depth",
        "max_pages",
        "follow_offsite",
        "extra_host",
        "delay",
        "concurrency",
        "daily_pages",
        "recrawl",
        "min_interval",
        "max_interval",
        "task",
        "crawl_limit",
        "batch_limit",
        "need_login",
        "need_selenium",
        "url_template",
        "secret_host",
        "enabled",
        "media_id",
    ]
)


def _options(add: bool):
    driver_help = "The crawl driver (see `crawlsched drivers`)."

    def command(
        ctx: typer.Context,
        name: str = typer.Argument(..., help="Media name: letters, digits, . _ - (news-site)."),
        driver: str | None = typer.Option(None, "--driver", help=driver_help),
        max_depth: int | None = typer.Option(None, help="Links deep a run follows (0: none)."),
        max_pages: int | None = typer.Option(None, help="Pages a run may discover at most."),
        follow_offsite: bool | None = typer.Option(
            None, "--follow-offsite/--stay-on-site", help="Follow links to other sites."
        ),
        extra_host: list[str] | None = typer.Option(None, help="Another host to follow (repeat)."),
        delay: float | None = typer.Option(None, help="Politeness: seconds between requests."),
        concurrency: int | None = typer.Option(None, help="Politeness: requests at once."),
        daily_pages: int | None = typer.Option(None, help="Politeness: pages a day (0: no cap)."),
        recrawl: Recrawl | None = typer.Option(None, help="Recrawl intervals: fixed or adaptive."),
        min_interval: float | None = typer.Option(None, help="Adaptive recrawl: shortest, s."),
        max_interval: float | None = typer.Option(None, help="Adaptive recrawl: longest, s."),
        task: list[str] | None = typer.Option(
            None, "--task", help="A task to add/change (repeat)."
        ),
        crawl_limit: int | None = typer.Option(None, help="The --task ones: items per job."),
        batch_limit: int | None = typer.Option(None, help="The --task ones: jobs per batch."),
        need_login: bool | None = typer.Option(
            None, "--need-login/--no-login", help="The --task ones need an account."
        ),
        need_selenium: bool | None = typer.Option(
            None, "--need-selenium/--no-selenium", help="The --task ones need a browser."
        ),
        url_template: str | None = typer.Option(None, help="Profile URL, with {handle}."),
        secret_host: list[str] | None = typer.Option(
            None, help="Where an account's secret may go (repeat)."
        ),
        enabled: bool | None = typer.Option(None, "--enabled/--disabled"),
        media_id: int | None = typer.Option(
            None, "--id", help="A new media's id (media_name_id; never changes): default next."
        ),
    ) -> None:
        given = {k: v for k, v in locals().items() if k in _OPTION_NAMES}
        if not add and media_id is not None:
            bad_input("--id: a media's id never changes (it joins its jobs and tasks)")
        if add and driver is None:
            bad_input("--driver: a new media needs a driver (see `crawlsched drivers`)")
        if add and not task:
            bad_input("--task: a new media needs at least one task")
        changes, task_changes = _changes(**given)
        tasks = {
            task: {k: v for k, v in fields.items() if v is not None}
            for task, fields in task_changes.items()
        }
        _save(ctx, name, not add, changes, tasks)

    return command


def register(app: typer.Typer) -> None:
    add = _options(add=True)
    add.__doc__ = "Add a media: its driver, tasks, discovery bounds, politeness and recrawl."
    app.command("add")(add)
    update = _options(add=False)
    update.__doc__ = "Change a media: only what the options give (a --task is added or changed)."
    app.command("update")(update)
