"""What the store shows a dispatch did, tallied from the job documents: the coordinator
believes only this, never what a report message says."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DispatchReport:
    held: int  # jobs the dispatch still holds
    counts: dict[str, int]  # outcome -> jobs
    links: int  # URLs its crawls found (counted, whether or not they became children)
    discovered: int = 0  # child jobs of the run whose parent page ended in this dispatch
    children: tuple[Any, ...] = ()  # their ids (released once counted)
    ended: tuple[Any, ...] = ()  # ids of the pages that ended in this dispatch
    items: dict[str, int] = field(default_factory=dict)  # new / changed / unchanged results
    cut: dict[str, int] = field(default_factory=dict)  # discoveries refused by a bound


# Labels a job's item and cut counts may carry (anything else in a document is ignored).
COUNT_LABELS = frozenset(
    {"new", "changed", "unchanged", "depth", "pages", "offsite", "refused", "not_http"}
)


def tally_dispatch(
    docs: Iterable[dict[str, Any]], dispatch_id: str, run_id: str, wanted: list[str]
) -> DispatchReport:
    """Sort each document into what the dispatch still holds and the outcomes (of the
    `wanted` labels) it wrote in this run; a document may count in both."""
    held = links = 0
    counts: dict[str, int] = {}
    items: dict[str, int] = {}
    cut: dict[str, int] = {}
    ended: list[Any] = []
    for doc in docs:
        if doc.get("dispatch_id") == dispatch_id:
            held += 1
        outcome = doc.get("last_outcome")
        if (
            doc.get("last_dispatch_id") != dispatch_id
            or doc.get("run_id") != run_id
            or not isinstance(outcome, str)
            or outcome not in wanted
        ):
            continue
        counts[outcome] = counts.get(outcome, 0) + 1
        ended.append(doc["_id"])
        found = doc.get("last_discovered")
        links += found if isinstance(found, int) and found > 0 else 0
        _add_small_counts(items, doc.get("last_items"))
        _add_small_counts(cut, doc.get("last_cut"))
    return DispatchReport(held, counts, links, items=items, cut=cut, ended=tuple(ended))


def _add_small_counts(into: dict[str, int], counts: Any) -> None:
    if not isinstance(counts, dict):
        return
    for label, n in counts.items():
        if label in COUNT_LABELS and isinstance(n, int) and not isinstance(n, bool) and n > 0:
            into[label] = into.get(label, 0) + min(n, 1_000_000)
