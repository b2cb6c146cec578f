"""What a run discovered while crawling: per depth, the children, and the cut-offs."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from crawlsched.catalog import JOB_COLLECTIONS, JobState
from crawlsched.ids import encode_id
from crawlsched.runtime import Runtime
from crawlsched.store.children import MongoChildStore

STATE_NAMES = {int(s): s.name.lower() for s in JobState}


def by_depth(rt: Runtime, run: dict[str, Any]) -> list[dict[str, Any]]:
    """Depth 0 is what was planned; deeper rows are the children, summed over collections."""
    rows: dict[int, dict[str, Any]] = {}
    for collection in JOB_COLLECTIONS:
        for row in MongoChildStore(rt.db, collection).by_depth(run["_id"]):
            into = rows.setdefault(row["depth"], dict.fromkeys(("discovered", "outstanding"), 0))
            into["discovered"] += row["discovered"]
            into["outstanding"] += row["outstanding"]
    children_left = sum(r["outstanding"] for r in rows.values())
    planned = run.get("planned", 0)
    left = 0 if run.get("planning") else max(run.get("outstanding", 0) - children_left, 0)
    table = [{"depth": 0, "discovered": planned, "outstanding": left, "done": planned - left}]
    for depth, row in sorted(rows.items()):
        table.append({"depth": depth, **row, "done": row["discovered"] - row["outstanding"]})
    return table


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


def children_rows(rt: Runtime, run_id: str, limit: int, skip: int) -> list[dict[str, Any]]:
    rows = []
    for collection in JOB_COLLECTIONS:
        for doc in MongoChildStore(rt.db, collection).of_run(run_id, limit + skip):
            rows.append(
                {
                    "job_id": encode_id(doc["_id"]),
                    "collection": collection,
                    "task": doc.get("task"),
                    "depth": doc.get("depth"),
                    "state": STATE_NAMES.get(doc.get("state"), str(doc.get("state"))),
                    "outcome": doc.get("last_outcome"),
                    "url": doc.get("url"),
                    "error": doc.get("last_error"),
                }
            )
    rows.sort(key=lambda r: (r["depth"] or 0, r["job_id"]))
    return rows[skip : skip + limit]


def children_table(rows: list[dict[str, Any]], title: str) -> Table:
    table = Table(title=title)
    for column in ("depth", "task", "state", "outcome", "url"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            str(row["depth"]), row["task"], row["state"], row["outcome"] or "-", row["url"]
        )
    return table
