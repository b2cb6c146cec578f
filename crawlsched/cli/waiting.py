"""What waits for what: batches grouped by the resources they need, as a table."""

from __future__ import annotations

from typing import Any

from rich.table import Table


def waiting_table(groups: list[dict[str, Any]], title: str = "Waiting for a resource") -> Table:
    """Waiting batches grouped by what they wait for (`flow.views.waiting_groups`)."""
    table = Table(title=title)
    for column in ("waits for", "media", "batches", "jobs", "oldest wait"):
        table.add_column(column)
    for g in groups:
        table.add_row(
            g["waits_for"],
            g["media"],
            str(g["batches"]),
            str(g["jobs"]),
            f"{g['oldest_wait_s']:.0f}s",
        )
    return table
