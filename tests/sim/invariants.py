"""Checks over the simulated web's request log: pure functions, each returning readable
violations (an empty list when the invariant holds).

A record needs `seq`, `host`, `path`, `start_s`, `end_s` (None: still in flight), `status`,
`retry_after` and `end_at` (the answer's wall time), as `web.Request` has. Times are virtual
seconds; `tolerance_s` absorbs float rounding, not slack in the rule.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

BLOCKING = frozenset({429, 503})
EXCERPT = 3  # violations reported per host and rule, at most


def _by_host(log: Iterable[Any], ignore: Sequence[str] = ()) -> dict[str, list[Any]]:
    hosts: dict[str, list[Any]] = defaultdict(list)
    for r in log:
        if r.path not in ignore:
            hosts[r.host].append(r)
    for records in hosts.values():
        records.sort(key=lambda r: (r.start_s, r.seq))
    return dict(sorted(hosts.items()))


def _per_host(value: float | Mapping[str, float], host: str, default: float) -> float:
    return value.get(host, default) if isinstance(value, Mapping) else value


def _excerpt(host: str, found: list[str]) -> list[str]:
    more = [f"{host}: … {len(found)} in all"] if len(found) > EXCERPT else []
    return found[:EXCERPT] + more


def _name(r: Any) -> str:
    return f"#{r.seq} {r.path}"


def starts_too_close(
    log: Iterable[Any],
    delay_s: float | Mapping[str, float],
    tolerance_s: float = 1e-6,
    ignore: Sequence[str] = (),
) -> list[str]:
    """No two request starts to one host closer than its delay (`delay_s`: one for all, or by
    host; a host not named has none)."""
    violations = []
    for host, records in _by_host(log, ignore).items():
        delay = _per_host(delay_s, host, 0.0)
        found = [
            f"{host}: {_name(b)} started {b.start_s - a.start_s:.3f} s after {_name(a)} "
            f"(at {b.start_s:.3f} s; delay {delay:g} s)"
            for a, b in itertools.pairwise(records)
            if b.start_s - a.start_s < delay - tolerance_s
        ]
        violations += _excerpt(host, found)
    return violations


def over_concurrency(
    log: Iterable[Any], limit: int | Mapping[str, int], default: int = 1
) -> list[str]:
    """Never more requests in flight to a host than its limit (a request is in flight from its
    start until its end; one ending at the instant another starts is not)."""
    violations = []
    for host, records in _by_host(log).items():
        cap = int(_per_host(limit, host, default))  # type: ignore[arg-type]
        events = []
        for r in records:
            end = float("inf") if r.end_s is None else r.end_s
            events += [(r.start_s, 1, r), (end, 0, r)]  # at one instant: ends first
        in_flight: dict[int, Any] = {}
        found = []
        for at, starts, r in sorted(events, key=lambda e: (e[0], e[1], e[2].seq)):
            if not starts:
                in_flight.pop(r.seq, None)
                continue
            in_flight[r.seq] = r
            if len(in_flight) > cap:
                names = ", ".join(_name(x) for x in in_flight.values())
                found.append(f"{host}: {len(in_flight)} in flight at {at:.3f} s (limit {cap}): "
                             f"{names}")  # fmt: skip
        violations += _excerpt(host, found)
    return violations


def block_seconds(
    retry_after: str | None, answered_at: datetime | None, unreadable_s: float
) -> float:
    """How long an answer's `Retry-After` blocks its host: delay-seconds, or an HTTP-date from
    the answer's time; `unreadable_s` when absent or unreadable (the crawl's least backoff)."""
    value = (retry_after or "").strip()
    if value.isdigit():
        return float(value)
    if value and answered_at is not None:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return unreadable_s
        return max(0.0, (when - answered_at).total_seconds())
    return unreadable_s


def blocks_shortened(
    log: Iterable[Any],
    unreadable_block_s: float = 0.0,
    max_block_s: float = 3600.0,
    grace_s: float = 0.0,
    tolerance_s: float = 1e-6,
    lost: Callable[[Any], bool] = lambda r: False,
) -> list[str]:
    """No request to a host starts while a block it answered is in force: a 429 or 503 blocks
    the host from its answer until its `Retry-After` (capped at `max_block_s`), or for
    `unreadable_block_s` without a readable one. Requests started within `grace_s` after the
    answer (sent by threads that could not have heard of it yet) are not counted, nor blocks
    whose answer was `lost` (its process died before it could keep it: `lost_in_crash`)."""
    violations = []
    for host, records in _by_host(log).items():
        found = []
        for blocker in records:
            if blocker.status not in BLOCKING or blocker.end_s is None or lost(blocker):
                continue
            length = block_seconds(blocker.retry_after, blocker.end_at, unreadable_block_s)
            until = blocker.end_s + min(length, max_block_s)
            found += [
                f"{host}: {_name(r)} started at {r.start_s:.3f} s, inside the block until "
                f"{until:.3f} s that {_name(blocker)} answered ({blocker.status}, Retry-After "
                f"{blocker.retry_after!r}) at {blocker.end_s:.3f} s"
                for r in records
                if blocker.end_s + grace_s < r.start_s < until - tolerance_s
            ]
        violations += _excerpt(host, found)
    return violations


def lost_in_crash(crashes: Iterable[Any], tolerance_s: float = 1e-6) -> Callable[[Any], bool]:
    """Whether an answer died with its process: the process (that generation) crashed at the
    virtual instant the answer arrived. Time stands still while a thread runs, so a crash
    between an answer and the store write that keeps it happens at that very instant (a crash
    just after the write is taken for one too: the check is lenient there, never strict)."""
    at = [(c.process, c.generation, c.virtual_s) for c in crashes]

    def lost(r: Any) -> bool:
        return r.end_s is not None and any(
            p == r.process and g == r.generation and abs(t - r.end_s) <= tolerance_s
            for p, g, t in at
        )

    return lost


def fetch_counts(log: Iterable[Any], ignore: Sequence[str] = ("/robots.txt",)) -> Counter[str]:
    """Requests per URL, not counting throttled answers (429, 503: the page is asked again by
    design) nor the paths in `ignore`."""
    return Counter(
        f"http://{r.host}{r.path}" for r in log if r.path not in ignore and r.status not in BLOCKING
    )


def fetched_too_often(
    log: Iterable[Any], most: int, ignore: Sequence[str] = ("/robots.txt",)
) -> list[str]:
    """Each page fetched at most `most` times (see `fetch_counts`)."""
    return [
        f"{url} fetched {n} times (at most {most})"
        for url, n in sorted(fetch_counts(log, ignore).items())
        if n > most
    ]
