"""`crawlsched media …`: the media rows of the reference data (driver, discovery bounds,
politeness, recrawl, tasks), seen and changed in the store, where planners and workers read
them. The reference file (`init-db --reference`) is the other way to set them."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from crawlsched.cli import media_edit, ops
from crawlsched.cli.common import backend, console, print_json, print_lines

app = typer.Typer(no_args_is_help=True)


def _politeness(row: dict[str, Any]) -> str:
    p = row.get("politeness") or {}
    parts = [
        f"{p['delay_s']:g} s" if p.get("delay_s") is not None else "",
        f"{p['concurrency']} at once" if p.get("concurrency") is not None else "",
        f"{p['daily_pages']}/day" if p.get("daily_pages") else "",
    ]
    return ", ".join(x for x in parts if x) or "-"


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def _recrawl(row: dict[str, Any]) -> str:
    r = row.get("recrawl") or {}
    if not r.get("adaptive"):
        return "fixed"
    return f"adaptive {_duration(r['min_interval_s'])}-{_duration(r['max_interval_s'])}"


def _bound(row: dict[str, Any], key: str) -> str:
    """The media's own bound, or `-`: the settings' default holds."""
    return str(row[key]) if row.get(key) is not None else "-"


@app.command("list")
def media_list(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="One JSON per line.")
) -> None:
    """Every media: driver, discovery bounds, politeness, recrawl and tasks."""
    rows = backend(ctx).items(ops.MEDIA, 100_000)
    if as_json:
        print_lines(rows)
        return
    table = Table(title="Media", caption="depth, pages -: the settings' defaults")
    for column in ("media", "id", "driver", "depth", "pages", "polite", "recrawl"):
        table.add_column(column, overflow="fold")
    # A task name is one word: the column is as wide as the longest (`profile_replies`).
    longest = max((len(t) for row in rows for t in row["tasks"]), default=5)
    table.add_column("tasks", no_wrap=True, min_width=longest)
    for row in rows:
        table.add_row(
            row["name"] + ("" if row.get("enabled", True) else " (off)"),
            str(row["id"]),
            row.get("driver_class", "-"),
            _bound(row, "max_depth"),
            _bound(row, "max_pages"),
            _politeness(row),
            _recrawl(row).replace(" ", "\n", 1),
            "\n".join(sorted(row["tasks"])),
        )
    console.print(table)
    if not rows:
        console.print("no media: the store holds no reference data")


@app.command("show")
def media_show(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="A media name, e.g. web."),
    as_json: bool = typer.Option(False, "--json", help="The row as the reference file has it."),
) -> None:
    """One media in full, as a reference file row (`--json`: paste-able into YAML)."""
    row = backend(ctx).call(ops.MEDIA_ONE, name=name)
    if as_json:
        print_json(row)
        return
    tasks = row.pop("tasks")
    row["politeness"] = _politeness(row)
    row["recrawl"] = _recrawl(row)
    for key in ("max_depth", "max_pages"):
        row[key] = row.get(key, "- (the settings' default)")
    for key, value in row.items():
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        console.print(f"{key:15} {shown if shown not in (None, '') else '-'}")
    table = Table(title=f"Tasks of {name}")
    for column in ("task", "login", "selenium", "crawl limit", "batch limit", "enabled"):
        table.add_column(column, overflow="fold")
    for task, t in sorted(tasks.items()):
        table.add_row(
            task,
            "yes" if t.get("need_login") else "no",
            "yes" if t.get("need_selenium") else "no",
            str(t.get("crawl_limit", "-")),
            str(t.get("batch_limit", "default")),
            "no" if t.get("enabled") is False else "yes",
        )
    console.print(table)


media_edit.register(app)
