"""Spread one host's pages over batches, so a thread's batch has pages of several hosts (pure).

A batch is crawled by one thread, the job whose host is ready soonest first
(`flow/crawl_loop.py`). Pages discovered together mostly share a host (a parent's links), so
cut in discovery order each batch of a children pass would hold one host's pages, and its
thread would sleep the host's delay between them while other hosts sit idle. Dealt round-robin
over their hosts before cutting, consecutive pages are of different hosts wherever the pass
has several, and each batch carries as many hosts as it can.

The deal works on consecutive windows of `window` jobs, so memory stays bounded however big the
pass, and a job never moves to another window (what is due first still leaves first). Within a
host the order is kept.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import TypeVar
from urllib.parse import urlsplit

T = TypeVar("T")

# Jobs dealt at once: a few batches' worth at the usual limits, a few hundred kB at most.
DEFAULT_WINDOW = 512


def origin_of(target: str) -> str:
    """`scheme://host:port` of a URL target; "" for a target that is not an absolute URL (a
    username, whose pages all go to its media's one site: dealt as one host, order kept).

    The pacer may group hosts more coarsely (by registrable domain or address); the origin is
    the finest grouping and spreading by it never puts fewer hosts in a batch."""
    try:
        parts = urlsplit(target)
        port = parts.port
    except ValueError:
        return ""
    if not parts.scheme or not parts.hostname:
        return ""
    return f"{parts.scheme.lower()}://{parts.hostname}:{port or ''}"


def deal_round_robin(jobs: Iterable[T], host_of: Callable[[T], str]) -> list[T]:
    """One window: the first job of each host (in the order hosts first appear), then the
    second of each, and so on."""
    queues: dict[str, deque[T]] = {}
    for job in jobs:
        queues.setdefault(host_of(job), deque()).append(job)
    dealt: list[T] = []
    while queues:
        for host in list(queues):
            queue = queues[host]
            dealt.append(queue.popleft())
            if not queue:
                del queues[host]
    return dealt


def spread_over_hosts(
    jobs: Iterable[T], host_of: Callable[[T], str], window: int = DEFAULT_WINDOW
) -> Iterator[T]:
    """`jobs` dealt round-robin over their hosts, window by window."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    stream = iter(jobs)
    while chunk := list(islice(stream, window)):
        yield from deal_round_robin(chunk, host_of)
