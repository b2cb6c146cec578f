"""Notice targets: Apprise URLs (Slack, Telegram, e-mail, …) told of a schedule's run ends. Pure.

An Apprise URL carries its service's secrets (a bot token, an SMTP password), so nothing here
ever puts the URL itself in a message: an error names the entry's position and scheme, and the
form shown to people is `scheme://host` from Apprise's own privacy rendering (Apprise masks a
host that is really a token, e.g. Telegram's bot id, as `1...T`).
"""

from __future__ import annotations

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
    """A checked Apprise URL: the URL (secret), its redacted form, and the servers it
    connects to as (host, port), which the network rule checks (port 0: the service's own)."""

    url: str
    shown: str
    service: str
    hosts: tuple[tuple[str, int], ...]


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
    return NoticeTarget(url, shown_form(plugin), str(plugin.service_name), network_hosts(plugin))


def shown_form(plugin: Any) -> str:
    """`scheme://host` of Apprise's privacy URL: no user, password, path or query."""
    private = urlsplit(plugin.url(privacy=True))
    host = private.netloc.rsplit("@", 1)[-1]
    return f"{private.scheme}://{host}"


def network_hosts(plugin: Any) -> tuple[tuple[str, int], ...]:
    """The server an Apprise service connects to, as (host, port): an e-mail's SMTP server
    (`smtp=`, or the one Apprise derives from the domain), or the URL's host for services
    whose template names a `host` (JSON, XML, form, rsyslog, Gotify, ntfy, Matrix, …). Other
    services are addressed by token (Telegram's "host" is its bot id) and connect to their
    own cloud; the send is checked at the socket all the same (`outbound.socket_guard`)."""
    port = plugin.port if isinstance(getattr(plugin, "port", None), int) else 0
    smtp = getattr(plugin, "smtp_host", None)
    if isinstance(smtp, str):
        return ((smtp, port),) if smtp else ()
    host = getattr(plugin, "host", None)
    if "host" in getattr(plugin, "template_tokens", {}) and isinstance(host, str) and host:
        return ((host, port),)
    return ()


def scrub(text: str, url: str, shown: str) -> str:
    """`text` with every token of the URL that its shown form does not reveal masked: a
    service's error message may quote part of what it was sent."""
    revealed = set(_TOKEN.findall(shown))
    for token in sorted(set(_TOKEN.findall(url)) - revealed, key=len, reverse=True):
        text = text.replace(token, "****")
    return text


def url_shown(url: str) -> str:
    """An http(s) URL as output shows it: `scheme://host[:port]`, nothing else."""
    try:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}"
    except ValueError:
        return "?"


def public_schedule(doc: dict[str, Any]) -> dict[str, Any]:
    """The schedule as output shows it: its webhook and each notice target by their redacted
    forms only (not even the ciphertext leaves the store)."""
    notify = doc.get("notify")
    if not isinstance(notify, dict):
        return doc
    shown: dict[str, Any] = dict(notify)
    if notify.get("notices"):
        shown["notices"] = [str(entry.get("shown", "?")) for entry in notify["notices"]]
    webhook = notify.get("webhook")
    if isinstance(webhook, dict):
        shown["webhook"] = str(webhook.get("shown", "?"))
    elif isinstance(webhook, str):  # stored before webhooks were sealed
        shown["webhook"] = url_shown(webhook)
    return {**doc, "notify": shown}
