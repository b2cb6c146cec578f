"""Which requests share one politeness clock: the key a URL's request is paced under.

- `origin` (the default): scheme, host and port (`https://example.com:443`), as
  `host_rules.host_key` writes it. `a.example.com` and `b.example.com` are paced apart.
- `domain`: the registrable domain (`domain:example.co.uk` for `https://a.b.example.co.uk/`),
  from the Public Suffix List as tldextract bundles it (no download), private suffixes included
  (`alice.github.io` and `bob.github.io` are two sites). A host with no registrable domain (an
  IP address, `localhost`) stands for itself. For sites that spread one server over many
  subdomains.
- `address`: the IP address the host resolves to (`address:93.184.216.34`, the first address
  the resolver gives). For many names served by one machine (shared hosting, a CDN edge), and
  for local test sites on several ports of one address.

robots.txt stays per origin whatever the grouping (RFC 9309: it speaks for its origin); its
`Crawl-delay` also raises the delay of the group the origin belongs to.

Pure but for the resolver, which is passed in.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from functools import cache
from typing import Literal
from urllib.parse import urlsplit

from crawlsched.resources.host_rules import DEFAULT_PORTS, host_key

Grouping = Literal["origin", "domain", "address"]
GROUPINGS: tuple[str, ...] = ("origin", "domain", "address")
DOMAIN_PREFIX, ADDRESS_PREFIX = "domain:", "address:"
MAX_KEY_CHARS = 300
HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")  # as urlsplit gives it, lower case

# host → the first IP address it resolves to (raises OSError when it does not resolve)
Resolve = Callable[[str], str]
# (host, port) → every address it resolves to: `drivers.targets.resolve`, or the crawl's cache
# of it (ValueError when it does not resolve)
ResolveAll = Callable[[str, int], list[str]]


def first_address(resolve_all: ResolveAll) -> Resolve:
    """A `Resolve` over the crawl's own resolver, so that pacing by address reads the same
    answers (and the same DNS cache) as the request's own address check."""

    def first(host: str) -> str:
        try:
            return resolve_all(host, 443)[0]
        except ValueError as e:
            raise OSError(str(e)) from None

    return first


@cache
def _extractor():  # loaded once, on first use: the bundled list is about 250 kB
    import tldextract

    return tldextract.TLDExtract(
        suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True
    )


def registrable_domain(host: str) -> str:
    """`a.b.example.co.uk` → `example.co.uk`; a host with none (an address, a single label,
    an unknown suffix) → the host itself, lower case."""
    host = host.strip().lower().rstrip(".")
    if _is_address(host):
        return host
    found = _extractor()(host)
    domain = found.top_domain_under_public_suffix
    return domain or host


def pacing_key(url: str, grouping: Grouping, resolve: Resolve | None = None) -> str:
    """The key `url`'s requests are paced under (see the module). ValueError for a URL that
    is not absolute, or an unknown grouping; OSError when `address` cannot resolve it."""
    origin = host_key(url)
    if grouping == "origin":
        return origin
    host = (urlsplit(url).hostname or "").lower()
    if grouping == "domain":
        return DOMAIN_PREFIX + registrable_domain(host)
    if grouping == "address":
        if _is_address(host):
            return ADDRESS_PREFIX + _written(host)
        if resolve is None:
            raise ValueError("grouping by address needs a resolver")
        return ADDRESS_PREFIX + _written(resolve(host))
    raise ValueError(f"grouping must be one of {', '.join(GROUPINGS)}, got {grouping!r}")


def is_pacing_key(text: str) -> bool:
    """A key exactly as `pacing_key` writes it, under any grouping (messages and operators'
    input are checked against this: a key is a store `_id` and a label)."""
    if not text or len(text) > MAX_KEY_CHARS:
        return False
    if text.startswith(ADDRESS_PREFIX):
        address = text.removeprefix(ADDRESS_PREFIX)
        return _is_address(address.strip("[]")) and _written(address.strip("[]")) == address
    if text.startswith(DOMAIN_PREFIX):
        domain = text.removeprefix(DOMAIN_PREFIX)
        return bool(HOST_NAME.fullmatch(domain)) and registrable_domain(domain) == domain
    try:
        return host_key(text) == text
    except ValueError:
        return False


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _written(address: str) -> str:
    """One spelling per address (IPv6 compressed, in brackets as in a URL)."""
    parsed = ipaddress.ip_address(address.strip("[]"))
    return f"[{parsed.compressed}]" if parsed.version == 6 else parsed.compressed


def origin_url_pattern(key: str) -> str | None:
    """A regular expression (to match case-insensitively, anchored at the start) that every
    URL paced under the origin key `key` matches: `http://a.test:80` → the URLs of `http://a.test`
    with or without `:80`. For reading a host's queued pages from the store by their URL; a URL
    it matches is still checked against its key (`pacing_key`), so the pattern may be wider but
    never narrower. None for a key of another grouping (domain, address): their URLs share no
    prefix."""
    if key.startswith((DOMAIN_PREFIX, ADDRESS_PREFIX)):
        return None
    scheme, _, rest = key.partition("://")
    host, _, port = rest.rpartition(":")
    if not scheme or not host or not port.isdigit():
        return None
    written_port = rf":{port}" if DEFAULT_PORTS.get(scheme) != int(port) else rf"(:{port})?"
    # userinfo (`user@`) may precede the host; the authority ends at a path, query or fragment.
    return rf"^{re.escape(scheme)}://([^/?#@]*@)?{re.escape(host)}{written_port}([/?#]|$)"
