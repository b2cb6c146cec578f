"""Notice targets: Apprise URLs (Slack, Telegram, e-mail, …) told of a schedule's run ends. Pure.

An Apprise URL carries its service's secrets (a bot token, an SMTP password), so nothing here
ever puts the URL itself in a message: an error names the entry's position and scheme, and the
form shown to people is `scheme://host` from Apprise's own privacy rendering (Apprise masks a
host that is really a token, e.g. Telegram's bot id, as `1...T`).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MAX_NOTICES = 10
MAX_NOTICE_URL_CHARS = 2000
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]{0,31})://")
# Runs of characters long enough to be a token or a password (see `scrub`).
_TOKEN = re.compile(r"[A-Za-z0-9_\-.~%+=]{4,}")


@dataclass(frozen=True)
class NoticeTarget:
    """A checked Apprise URL: the URL (secret), its redacted form, and the addresses it names
    literally (IP literals, localhost), which the network rule checks."""

    url: str
    shown: str
    service: str
    addresses: tuple[str, ...]


def parse_notice_url(url: Any, position: int | None = None) -> NoticeTarget:
    """The target an Apprise URL names, or ValueError naming the entry (never the URL)."""
    where = "notices" if position is None else f"notices: entry {position}"
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"{where}: an Apprise URL (e.g. tgram://TOKEN/CHAT_ID)")
    if len(url) > MAX_NOTICE_URL_CHARS:
        raise ValueError(f"{where}: at most {MAX_NOTICE_URL_CHARS} characters")
    scheme = _SCHEME.match(url)
    if scheme is None:
        raise ValueError(f"{where}: not a URL of the form scheme://…")
    import apprise  # on first use: importing it and its ~190 services takes a second or more

    plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    if plugin is None:
        name = scheme.group(1).lower()
        raise ValueError(
            f"{where}: {name}:// is not a notice URL Apprise accepts (an unknown scheme, "
            "or a URL its service cannot use; see https://appriseit.com/services/)"
        )
    return NoticeTarget(url, shown_form(plugin), str(plugin.service_name), _addresses(plugin))


def shown_form(plugin: Any) -> str:
    """`scheme://host` of Apprise's privacy URL: no user, password, path or query."""
    private = urlsplit(plugin.url(privacy=True))
    host = private.netloc.rsplit("@", 1)[-1]
    return f"{private.scheme}://{host}"


def _addresses(plugin: Any) -> tuple[str, ...]:
    """The IP addresses the URL names as the server to reach (an SMTP server, a JSON
    receiver), `localhost` as 127.0.0.1. Names are not resolved: a service addressed by
    token has a "host" that is no host at all (Telegram's bot id), so only literals are
    known to be addresses."""
    found = []
    for name in ("smtp_host", "host"):
        host = getattr(plugin, name, None)
        if not isinstance(host, str) or not host:
            continue
        if host == "localhost" or host.endswith(".localhost"):
            found.append("127.0.0.1")
            continue
        try:
            found.append(str(ipaddress.ip_address(host.strip("[]"))))
        except ValueError:
            continue
    return tuple(dict.fromkeys(found))


def scrub(text: str, url: str, shown: str) -> str:
    """`text` with every token of the URL that its shown form does not reveal masked: a
    service's error message may quote part of what it was sent."""
    revealed = set(_TOKEN.findall(shown))
    for token in sorted(set(_TOKEN.findall(url)) - revealed, key=len, reverse=True):
        text = text.replace(token, "****")
    return text


def public_schedule(doc: dict[str, Any]) -> dict[str, Any]:
    """The schedule as output shows it: each notice target by its redacted form only (not
    even the ciphertext leaves the store)."""
    notify = doc.get("notify")
    if not isinstance(notify, dict) or not notify.get("notices"):
        return doc
    shown = [str(entry.get("shown", "?")) for entry in notify["notices"]]
    return {**doc, "notify": {**notify, "notices": shown}}
