"""May we send to this address? One rule for every outgoing connection: the crawl's pages,
webhooks, notices and Selenium nodes. Pure apart from name resolution, which is passed in.

An address is refused when it is private, loopback, link-local (cloud metadata at
169.254.169.254), multicast, reserved, unspecified or otherwise not global, unless an allowed
network admits it. An IPv6 address that carries an IPv4 one (mapped `::ffff:a.b.c.d`, 6to4
`2002:…`) is judged by the IPv4 address too.

A host is never judged by its text. To a resolver `2130706433`, `0x7f000001`, `0177.0.0.1`,
`127.1` and `127.000.000.001` are all 127.0.0.1 (getaddrinfo reads a numeric host as
inet_aton does, and requests, smtplib and httpx all go through it), `LOCALHOST` is
`localhost`, and any name in /etc/hosts may be loopback. So a host is resolved and every
address it resolves to is checked (`check_host`). Where nothing may be resolved (a job added
by the thousand, names checked again before each fetch), `literal_addresses` reads what a
host's text alone says, in every spelling a resolver accepts.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence

from crawlsched.errors import HostUnresolvable, UnsafeTarget

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# (host, port) → every address the host resolves to, as text; UnsafeTarget when none.
Resolver = Callable[[str, int], list[str]]
REFUSED_KINDS = ("loopback", "link_local", "private", "multicast", "reserved", "unspecified")
# What a `localhost` name is taken for where nothing is resolved (its real answer, checked
# when it is resolved, may add ::1).
LOOPBACK = ("127.0.0.1",)
TARGETS = "CRAWLSCHED_TARGET_ALLOW_NETWORKS"
_DIGITS = {
    8: frozenset("01234567"),
    10: frozenset("0123456789"),
    16: frozenset("0123456789abcdefABCDEF"),
}


def parse_networks(values: Iterable[str]) -> tuple[IpNetwork, ...]:
    return tuple(ipaddress.ip_network(v.strip(), strict=False) for v in values)


def resolve(host: str, port: int) -> list[str]:
    """Every address the host resolves to (the connection may use any of them)."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as e:
        raise HostUnresolvable(f"host {host!r} does not resolve: {e}") from None
    return sorted({str(info[4][0]) for info in infos})


def refusal(address: IpAddress, allowed: Sequence[IpNetwork]) -> str | None:
    """Why `address` is refused (its kind, e.g. `loopback`), or None when it may be reached."""
    if any(address in network for network in allowed if network.version == address.version):
        return None
    embedded = getattr(address, "ipv4_mapped", None) or getattr(address, "sixtofour", None)
    if embedded is not None:
        return refusal(embedded, allowed)
    for kind in REFUSED_KINDS:
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    if not address.is_global:
        return "non-global"
    return None


def check_addresses(
    where: str, addresses: Sequence[str], allowed: Sequence[IpNetwork], setting: str = TARGETS
) -> None:
    """UnsafeTarget naming `where` (a URL, or `//host:port`) unless every address may be
    reached; the message names `setting`, the variable that would allow it."""
    for text in addresses:
        reason = refusal(ipaddress.ip_address(text.split("%")[0]), allowed)
        if reason is not None:
            raise UnsafeTarget(
                f"{where!r} resolves to {reason} address {text}; "
                f"add its network to {setting} to allow it"
            )


def inet_aton(text: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a numeric host names in any form inet_aton reads (`a`, `a.b`,
    `a.b.c`, `a.b.c.d`; each part decimal, `0x` hex or `0` octal), or None. Pure, and the
    C library's function without its one laxity: junk after a space, which no host has."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values = [_number(part) for part in parts]
    if any(v is None for v in values):
        return None
    *head, last = values
    if any(v > 255 for v in head) or last >= 1 << (8 * (5 - len(parts))):
        return None
    number = last
    for position, value in enumerate(head):
        number |= value << (8 * (3 - position))
    return ipaddress.IPv4Address(number)


def _number(part: str) -> int | None:
    if part[:2].lower() == "0x":
        digits, base = part[2:], 16
    elif len(part) > 1 and part[0] == "0":
        digits, base = part[1:], 8
    else:
        digits, base = part, 10
    if not digits or any(c not in _DIGITS[base] for c in digits):
        return None
    value = int(digits, base)
    return value if value < 1 << 32 else None


def is_local_name(host: str) -> bool:
    """`localhost` and its subdomains (RFC 6761), in any case, with or without a final dot."""
    name = host.lower().rstrip(".")
    return name == "localhost" or name.endswith(".localhost")


def literal_addresses(host: str) -> list[str] | None:
    """The addresses a host's text names without asking DNS: an IP address in any spelling
    (brackets and an IPv6 zone allowed), a `localhost` name as loopback; None for a name."""
    text = host.strip()
    if text.startswith("["):  # `[v6]`, or `[v6]:port` as some services keep their host
        text = text[1:].split("]", 1)[0]
    if is_local_name(text):
        return list(LOOPBACK)
    try:
        return [str(ipaddress.ip_address(text.split("%")[0]))]
    except ValueError:
        pass
    legacy = inet_aton(text)
    return None if legacy is None else [str(legacy)]


def check_host(
    host: str,
    port: int,
    allowed: Sequence[IpNetwork],
    resolver: Resolver = resolve,
    where: str | None = None,
    setting: str = TARGETS,
) -> list[str]:
    """Resolve `host` and refuse it (UnsafeTarget) unless every address may be reached; the
    addresses it checked, for a caller that connects to them itself."""
    addresses = literal_addresses(host)
    if addresses is None:
        addresses = resolver(host, port)
    check_addresses(where or f"//{host}:{port}", addresses, allowed, setting)
    return addresses
