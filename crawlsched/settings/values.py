"""What the settings check against, and the helpers that read a setting's value (broker URLs,
host:port addresses, the data directory's default)."""

from __future__ import annotations

import ipaddress
import re

from crawlsched.paths import default_data_dir

__all__ = ["default_data_dir", "split_address", "split_broker_urls", "spread_nodes"]

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# The longest retention a setting accepts: ten years.
MAX_RETAIN_S = 10 * 365 * 86400.0
# What Debian's chromium asks for on every session although its flags say not to: the component
# updater's essential components, and the account reconciler of a build with Google API keys.
SILENCED_HOSTS = ("accounts.google.com", "update.googleapis.com")
HOST_NAME = re.compile(
    r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+"
)
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def checked_networks(field: str, value: list[str]) -> list[str]:
    """A setting's list of networks (CIDR), each one checked; ValueError naming the field."""
    for text in value:
        try:
            ipaddress.ip_network(text.strip(), strict=False)
        except ValueError:
            raise ValueError(f"{field}: not a network: {text[:60]!r}") from None
    return value


def split_broker_urls(value: str) -> list[str]:
    """`a;b;c` → its URLs: the separator dramatiq's RabbitmqBroker takes for a cluster's nodes."""
    return [url.strip() for url in value.split(";") if url.strip()] or [value]


def spread_nodes(urls: list[str], offset: int) -> list[str]:
    """`urls` rotated to start at `offset` (mod their number): every process tries every node,
    in the same cyclic order, but processes with different offsets start at different nodes."""
    if not urls:
        return []
    start = offset % len(urls)
    return urls[start:] + urls[:start]


def split_address(value: str, field: str = "address") -> tuple[str, int]:
    """`host:port` (IPv6 as `[::1]:9191`) → (host, port); ValueError naming the field."""
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{field} must be host:port with a port 1-65535, got {value!r}")
    return host, int(port)
