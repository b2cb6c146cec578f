"""A simulated web, drawn from a seed: hosts `h0.sim`, `h1.sim`, …, their pages, links,
behaviours and robots.txt; and which URLs a correct crawl from given seeds must end, and how.

Each host has pages `/p/0` (its root) … `/p/<n-1>` in levels: `/p/i` links its children
(`fan_out` of them, `depth` levels deep), `extra_links` other pages of its host (back and
sideways links: cycles), sometimes a page of another host and sometimes a dead link `/d/<k>`.
A page other than a root behaves in one of these ways:
- `ok`: 200 HTML with its links;
- `not_found`: 404;
- `redirect`: 301 or 302 to another page of its host;
- `throttle`: 429 or 503 with `Retry-After` in seconds, as an HTTP-date, as garbage (`soon`) or
  absent, `times` times and then as `ok`; or forever (`times` None).
Any page may be slow (a latency of seconds, on the virtual clock). A host's robots.txt is
missing (404), open, sets a `Crawl-delay`, or disallows one page.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

KINDS = ("ok", "not_found", "redirect", "throttle")
RETRY_AFTER_STYLES = ("seconds", "http_date", "garbage", "absent")
ROBOTS_KINDS = ("missing", "open", "crawl_delay", "disallow")


@dataclass(frozen=True)
class WebSpec:
    """How to draw a web. Weights need not sum to 1."""

    hosts: int = 3
    pages_per_host: int = 12
    depth: int = 3
    fan_out: int = 3
    extra_links: int = 1
    cross_host_p: float = 0.2
    dead_link_p: float = 0.1
    kind_weights: tuple[float, float, float, float] = (0.7, 0.1, 0.1, 0.1)  # as KINDS
    forever_p: float = 0.25  # of throttled pages, those that never answer 200
    max_throttle_times: int = 3
    max_retry_after_s: int = 4
    robots_weights: tuple[float, float, float, float] = (0.25, 0.25, 0.25, 0.25)  # as ROBOTS_KINDS
    max_crawl_delay_s: int = 3
    latency_s: tuple[float, float] = (0.01, 0.2)
    slow_p: float = 0.1
    slow_latency_s: tuple[float, float] = (2.0, 8.0)

    def __post_init__(self) -> None:
        for name in ("hosts", "pages_per_host", "fan_out"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("cross_host_p", "dead_link_p", "forever_p", "slow_p"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {getattr(self, name)}")


@dataclass(frozen=True)
class Page:
    url: str
    kind: str = "ok"
    links: tuple[str, ...] = ()  # as written in the page: a path on its host, else absolute
    latency_s: float = 0.0
    status: int = 200  # a redirect's 301/302, a throttle's 429/503
    location: str | None = None  # a redirect's target (absolute)
    retry_after: str = "absent"  # a throttle's style, of RETRY_AFTER_STYLES
    retry_after_s: int = 0  # the seconds it means (style seconds or http_date)
    times: int | None = 0  # a throttle's answers before 200; None: forever


@dataclass(frozen=True)
class Host:
    name: str  # h0.sim
    robots: str = "missing"  # of ROBOTS_KINDS
    crawl_delay_s: int | None = None
    disallowed: tuple[str, ...] = ()  # paths

    @property
    def robots_txt(self) -> str | None:
        """The file's text; None when it answers 404."""
        if self.robots == "missing":
            return None
        lines = ["User-agent: *"]
        lines += [f"Disallow: {p}" for p in self.disallowed] or ["Disallow:"]
        if self.crawl_delay_s is not None:
            lines.append(f"Crawl-delay: {self.crawl_delay_s}")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Expected:
    """How a correct crawl ends a URL: `succeeded`, `failed` (on its own merits: a 404, a
    robots.txt refusal) or `given_up` (throttled more often than allowed)."""

    url: str
    end: str
    reason: str
    depth: int


@dataclass(frozen=True)
class Reachable:
    pages: dict[str, Expected]
    # Whether `pages` is what any crawl order reaches: a URL keeps the depth of its first
    # discovery, which a slow page can make deeper than its shortest path, so a binding
    # `max_depth` makes the set depend on the order. Exact when max_depth >= pages - 1.
    exact: bool

    def ending(self, end: str) -> set[str]:
        return {u for u, e in self.pages.items() if e.end == end}


@dataclass(frozen=True)
class SiteMap:
    hosts: dict[str, Host]
    pages: dict[str, Page] = field(default_factory=dict)  # by absolute URL

    def seeds(self) -> list[str]:
        return [f"http://{h}/p/0" for h in self.hosts]

    def page(self, url: str) -> Page | None:
        return self.pages.get(url)

    def disallowed(self, url: str) -> bool:
        parts = urlsplit(url)
        host = self.hosts.get(parts.hostname or "")
        return host is not None and any(parts.path.startswith(p) for p in host.disallowed)

    def reachable(
        self,
        seeds: Iterable[str],
        max_depth: int,
        same_site: bool = True,
        give_up_after: int | None = None,
    ) -> Reachable:
        """Breadth first from `seeds` (depth 0), as crawlsched discovers: a page's links and a
        redirect's target at depth + 1 up to `max_depth`, on the seed's host when `same_site`,
        each URL once. A page throttled `times` > `give_up_after` times (or forever) ends
        given up; it is given up at its (give_up_after + 1)-th throttled answer."""
        pages = self._walk(list(seeds), max_depth, same_site, give_up_after)
        unbounded = self._walk(list(seeds), len(self.pages) + 1, same_site, give_up_after)
        return Reachable(pages, max_depth >= len(unbounded) - 1)

    def _walk(self, seeds, max_depth, same_site, give_up_after) -> dict[str, Expected]:
        found: dict[str, Expected] = {}
        todo: deque[tuple[str, int, str]] = deque()
        for seed in seeds:
            if seed not in found:
                found[seed] = self._expect(seed, 0, give_up_after)
                todo.append((seed, 0, urlsplit(seed).hostname or ""))
        while todo:
            url, depth, site = todo.popleft()
            if depth >= max_depth:
                continue
            for target in self._followed(url, found[url]):
                if target in found or (same_site and urlsplit(target).hostname != site):
                    continue
                found[target] = self._expect(target, depth + 1, give_up_after)
                todo.append((target, depth + 1, site))
        return found

    def _followed(self, url: str, expected: Expected) -> list[str]:
        page = self.pages.get(url)
        if page is None or expected.end != "succeeded":
            return []
        if page.kind == "redirect":
            return [page.location] if page.location else []
        return [absolute(url, link) for link in page.links]

    def _expect(self, url: str, depth: int, give_up_after: int | None) -> Expected:
        page = self.pages.get(url)
        if self.disallowed(url):
            return Expected(url, "failed", "disallowed by robots.txt", depth)
        if page is None or page.kind == "not_found":
            return Expected(url, "failed", "HTTP 404", depth)
        if page.kind == "throttle":
            limit = float("inf") if give_up_after is None else give_up_after
            if page.times is None or page.times > limit:
                times = "forever" if page.times is None else f"{page.times} times"
                return Expected(url, "given_up", f"HTTP {page.status} {times}", depth)
        if page.kind == "redirect":
            return Expected(url, "succeeded", f"HTTP {page.status} to {page.location}", depth)
        return Expected(url, "succeeded", "HTTP 200", depth)


def absolute(base: str, link: str) -> str:
    if link.startswith("http"):
        return link
    parts = urlsplit(base)
    return f"{parts.scheme}://{parts.netloc}{link}"


def draw_web(seed: int, spec: WebSpec) -> SiteMap:
    """The web of `seed` (the same for the same seed and spec, in any process)."""
    rng = random.Random(f"{seed}:web")
    names = [f"h{i}.sim" for i in range(spec.hosts)]
    sizes = {name: _pages_within(spec) for name in names}
    pages: dict[str, Page] = {}
    for name in names:
        for i in range(sizes[name]):
            url = f"http://{name}/p/{i}"
            links = _links(rng, spec, names, sizes, name, i)
            pages[url] = _behaviour(rng, spec, url, links, sizes[name], root=i == 0)
            for link in links:
                if link.startswith("/d/"):
                    dead = f"http://{name}{link}"
                    pages[dead] = Page(dead, "not_found", latency_s=spec.latency_s[0])
    hosts = {name: _host(rng, spec, name, sizes[name]) for name in names}
    return SiteMap(hosts, pages)


def _pages_within(spec: WebSpec) -> int:
    """Pages of a host: `pages_per_host`, fewer when `depth` levels of `fan_out` hold less."""
    total, level = 0, 1
    for _ in range(spec.depth + 1):
        total += level
        level *= spec.fan_out
    return min(spec.pages_per_host, total)


def _links(rng, spec: WebSpec, names, sizes, name: str, i: int) -> tuple[str, ...]:
    n = sizes[name]
    links = [f"/p/{c}" for c in range(spec.fan_out * i + 1, spec.fan_out * i + spec.fan_out + 1)]
    links = [link for link in links if int(link[3:]) < n]
    links += [f"/p/{rng.randrange(n)}" for _ in range(spec.extra_links)]
    others = [h for h in names if h != name]
    if others and rng.random() < spec.cross_host_p:
        other = rng.choice(others)
        links.append(f"http://{other}/p/{rng.randrange(sizes[other])}")
    if rng.random() < spec.dead_link_p:
        links.append(f"/d/{i}")
    return tuple(dict.fromkeys(links))


def _behaviour(rng, spec: WebSpec, url: str, links, n: int, root: bool) -> Page:
    slow = rng.random() < spec.slow_p
    latency = rng.uniform(*(spec.slow_latency_s if slow else spec.latency_s))
    kind = "ok" if root else rng.choices(KINDS, spec.kind_weights)[0]
    if kind == "redirect":
        here = int(url.rsplit("/", 1)[1])
        target = rng.choice([k for k in range(n) if k != here] or [0])
        location = f"{url.rsplit('/p/', 1)[0]}/p/{target}"
        return Page(url, kind, (), latency, rng.choice((301, 302)), location)
    if kind == "throttle":
        times = None if rng.random() < spec.forever_p else rng.randint(1, spec.max_throttle_times)
        style = rng.choice(RETRY_AFTER_STYLES)
        return Page(
            url, kind, links, latency, rng.choice((429, 503)), None, style,
            rng.randint(1, spec.max_retry_after_s), times,
        )  # fmt: skip
    if kind == "not_found":
        return Page(url, kind, (), latency, 404)
    return Page(url, "ok", links, latency)


def _host(rng, spec: WebSpec, name: str, n: int) -> Host:
    robots = rng.choices(ROBOTS_KINDS, spec.robots_weights)[0]
    delay = rng.randint(1, spec.max_crawl_delay_s) if robots == "crawl_delay" else None
    disallowed = (f"/p/{rng.randrange(1, n)}",) if robots == "disallow" and n > 1 else ()
    return Host(name, robots, delay, disallowed)
