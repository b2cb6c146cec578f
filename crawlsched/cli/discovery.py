"""What a run discovered while crawling, drawn: per depth, the pages, and the cut-offs."""

from __future__ import annotations

from typing import Any

from rich.table import Table


def depth_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="Pages per depth (0: planned)")
    for column in ("depth", "discovered", "outstanding", "done"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*(str(row[c]) for c in ("depth", "discovered", "outstanding", "done")))
    return table


def summary(run: dict[str, Any]) -> str:
    """Items stored (new / changed / unchanged) and discoveries a bound cut, on one line."""
    items = run.get("items") or {}
    cut = run.get("cut") or {}
    text = (
        f"items: {items.get('new', 0)} new, {items.get('changed', 0)} changed, "
        f"{items.get('unchanged', 0)} unchanged; discovered {run.get('discovered', 0)}"
    )
    if cut:
        text += "; cut by bounds: " + ", ".join(f"{k} {v}" for k, v in sorted(cut.items()))
    return text


def children_table(rows: list[dict[str, Any]], title: str) -> Table:
    table = Table(title=title)
    for column in ("depth", "task", "state", "outcome", "url", "error"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            str(row["depth"]),
            row["task"],
            row["state"],
            row["outcome"] or "-",
            row["url"],
            row.get("error") or "-",
        )
    return table
