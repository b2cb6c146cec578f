"""Link graphs served on 127.0.0.1, and what a crawl from their start page must find.

A graph has pages `/p/<i>` (HTML, linking to other URLs), redirects `/r/<k>` (302 to a page),
dead links `/d/<k>` (404) and, on one page, a fan-out of hundreds of leaves `/l/<k>`. The
server counts every request per path, so a test can tell that each URL was fetched once, and
keeps an access log (arrival time and path of every GET).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from hypothesis import strategies as st

from crawlsched.demo.serving import LocalSite, QuietHandler


@dataclass(frozen=True)
class LinkGraph:
    links: dict[int, list[str]]  # page number -> the paths it links to, in order
    redirects: dict[int, int] = field(default_factory=dict)  # /r/<k> -> page
    leaves: int = 0  # /l/0 … /l/<leaves-1>, linked from page 0

    def reachable(self) -> set[str]:
        """Every path a crawl from /p/0 requests (links and redirects followed, once each)."""
        seen, todo = {"/p/0"}, ["/p/0"]
        while todo:
            path = todo.pop()
            kind, _, number = path[1:].partition("/")
            out: list[str] = []
            if kind == "p":
                out = self.links.get(int(number), [])
            elif kind == "r":
                out = [f"/p/{self.redirects[int(number)]}"]
            for target in out:
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    def stored(self) -> set[str]:
        """The paths whose pages a crawl stores: reachable pages and leaves (not redirects or
        dead links)."""
        return {p for p in self.reachable() if p.startswith(("/p/", "/l/"))}

    def page(self, path: str) -> tuple[int, bytes, dict[str, str]]:
        kind, _, number = path[1:].partition("/")
        if not number.isdigit():
            return 404, b"not found", {}
        n = int(number)
        if kind == "r" and n in self.redirects:
            return 302, b"", {"Location": f"/p/{self.redirects[n]}"}
        if kind == "l" and n < self.leaves:
            return 200, f"<html><title>leaf {n}</title></html>".encode(), {}
        if kind == "p" and n in self.links:
            anchors = "".join(f'<a href="{t}">{t}</a>' for t in self.links[n])
            return 200, f"<html><title>page {n}</title><body>{anchors}</body></html>".encode(), {}
        return 404, b"gone", {}


@st.composite
def link_graphs(draw, max_pages: int = 12, max_leaves: int = 300) -> LinkGraph:
    """Cycles, self-links, redirects between pages, dead links, and a fan-out of hundreds."""
    n = draw(st.integers(1, max_pages))
    redirects = draw(st.dictionaries(st.integers(0, 3), st.integers(0, n - 1), max_size=3))
    targets = st.one_of(
        st.integers(0, n - 1).map(lambda i: f"/p/{i}"),
        st.sampled_from(sorted(redirects) or [0]).map(lambda k: f"/r/{k}" if redirects else "/p/0"),
        st.integers(0, 2).map(lambda k: f"/d/{k}"),
    )
    links = {i: draw(st.lists(targets, max_size=6)) for i in range(n)}
    leaves = draw(st.sampled_from([0, 0, max_leaves]))
    links[0] = [*links[0], *(f"/l/{k}" for k in range(leaves))]
    return LinkGraph(links, redirects, leaves)


def layered_graph(pages: int, seed: int, fan_out: int = 4, dead: int = 0, redirects: int = 0):
    """A tree of `pages` pages (`fan_out` children each, so several levels deep), each page
    also linking back to a random earlier one; `dead` links to 404s and `redirects` links
    through a 302, spread over random pages. Deterministic in `seed`."""
    if pages < 1:
        raise ValueError(f"pages must be >= 1, got {pages}")
    rng = random.Random(seed)
    links = {
        i: [f"/p/{c}" for c in range(fan_out * i + 1, min(fan_out * i + fan_out + 1, pages))]
        + [f"/p/{rng.randrange(i + 1)}"]
        for i in range(pages)
    }
    for k in range(dead):
        links[rng.randrange(pages)].append(f"/d/{k}")
    targets = {k: rng.randrange(pages) for k in range(redirects)}
    for k in targets:
        links[rng.randrange(pages)].append(f"/r/{k}")
    return LinkGraph(links, targets)


def depth_of(graph: LinkGraph) -> int:
    """Levels below the start page (breadth-first over links and redirects)."""
    level, seen, frontier = 0, {"/p/0"}, ["/p/0"]
    while True:
        following = []
        for path in frontier:
            kind, _, number = path[1:].partition("/")
            out = graph.links.get(int(number), []) if kind == "p" else []
            if kind == "r":
                out = [f"/p/{graph.redirects[int(number)]}"]
            for target in out:
                if target not in seen:
                    seen.add(target)
                    following.append(target)
        if not following:
            return level
        level, frontier = level + 1, following


class GraphSite(LocalSite):
    """Serve a LinkGraph on an ephemeral loopback port; `with GraphSite(graph) as site:`."""

    def __init__(self, graph: LinkGraph, delay_s: float = 0.0) -> None:
        self.graph = graph
        self.fetches: Counter[str] = Counter()
        self.access_log: list[tuple[float, str]] = []  # (unix time of arrival, path) per GET
        lock = threading.Lock()
        site = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                with lock:
                    site.fetches[self.path] += 1
                    site.access_log.append((time.time(), self.path))
                if delay_s:
                    time.sleep(delay_s)  # a slow site: a batch is in flight long enough to kill
                status, body, headers = site.graph.page(self.path)
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                # The client may be a worker that a test killed.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

            def handle(self) -> None:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    super().handle()

        super().__init__(Handler)
