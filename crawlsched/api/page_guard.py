"""What lets the status page's buttons act, and nothing else: the cookie of an admin token,
a request from the page's own origin, and the page's CSRF token in a header.

The page's cookie is SameSite=Strict, but SameSite does not tell the ports of one host apart:
a page served on another port of the same host is the same site, and a form it auto-submits
carries the cookie. Such a request is refused three times over:
- its `Origin` (which every browser sends on a POST) names another origin, or
  `Sec-Fetch-Site` says it is not same-origin;
- a form cannot set a header, and a script of another origin cannot send a custom one
  without a CORS preflight, which this server never answers;
- the CSRF token is derived from the cookie's token (an HMAC keyed by it), which no other
  origin can read (HttpOnly) or compute.
The API's own changing routes take no cookie at all (`auth.token_of`).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from urllib.parse import urlsplit

CSRF_HEADER = "x-crawlsched-csrf"
_PURPOSE = b"crawlsched status page actions"


def csrf_token(token: str) -> str:
    """The page's CSRF token for a session whose cookie holds `token`."""
    return hmac.new(token.encode(), _PURPOSE, hashlib.sha256).hexdigest()


def csrf_matches(token: str, given: str | None) -> bool:
    # As bytes: compare_digest refuses str with non-ASCII characters, which a header may hold.
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode(errors="replace"), csrf_token(token).encode())


def same_origin(headers: Mapping[str, str]) -> bool:
    """Whether a request comes from a page of this server's own origin: its `Origin` names
    the host (and port) it was sent to, and `Sec-Fetch-Site`, when sent, agrees."""
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site != "same-origin":
        return False
    origin, host = headers.get("origin"), headers.get("host")
    if not origin or not host:
        return False
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:
        return False
    return bool(netloc) and netloc.lower() == host.lower()
