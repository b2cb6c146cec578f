"""How an operator names a host, and which stored hosts that name can mean. Pure.

`example.com` means https on port 443, as the README says, but a host crawled over http has a
key of its own (`http://example.com:80`): a name without a scheme can mean either, and the
store says which was crawled. A name must look like one: a word without a dot (`nosuch`) is
no host on the web, and is refused rather than paced (`localhost` aside).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from crawlsched.resources.host_grouping import is_pacing_key
from crawlsched.resources.host_rules import host_key

SCHEMES = ("https", "http")
DEFAULT_PORTS = {"https": 443, "http": 80}


def host_candidates(text: str) -> list[str]:
    """The host keys `text` may mean, the likeliest first: one for an origin or a key of
    another grouping, https then http for a name without a scheme. ValueError (naming the
    text and what a host looks like) for what is no host."""
    text = text.strip()
    if not text:
        raise ValueError("empty host: give a name (example.com) or an origin")
    if text.startswith(("domain:", "address:")):
        key = text.lower()
        if not is_pacing_key(key):
            raise ValueError(
                f"not a host: {text!r} (domain:NAME with a registrable NAME, or address:IP)"
            )
        return [key]
    if "://" in text:
        try:
            return [host_key(text)]
        except ValueError:
            raise ValueError(
                f"not a host: {text!r} (an origin looks like https://example.com)"
            ) from None
    try:
        parts = urlsplit(f"//{text}")
        name, port = (parts.hostname or ""), parts.port
    except ValueError:
        raise ValueError(f"not a host: {text!r} (a port is a number up to 65535)") from None
    if not name or ("." not in name and ":" not in name and name != "localhost"):
        raise ValueError(
            f"not a host: {text!r} (a host name has a dot, like example.com; or give an origin, "
            f"like http://{text}:8080)"
        )
    shown = f"[{name}]" if ":" in name else name
    return [host_key(f"{s}://{shown}:{port or DEFAULT_PORTS[s]}") for s in SCHEMES]
