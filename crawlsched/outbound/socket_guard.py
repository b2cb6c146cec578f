"""While a notice is sent, every socket it opens goes only to an address the rule allows.

Apprise's ~150 services each open their connections their own way: requests for JSON, XML,
form and most HTTP APIs, smtplib for e-mail, a bare UDP socket for rsyslog, paho for MQTT.
There is no one client to hand a checked transport to, and a URL's host checked beforehand
can be resolved again, differently, when the library connects. What every one of them goes
through is the socket: so, inside `only_allowed(...)`, `connect`, `connect_ex` and `sendto`
on any socket resolve the address they are given, check every result with the shared rule,
and connect or send to that checked address itself (no second resolution to rebind). A Unix
socket (`syslog://`, D-Bus) is refused outright: a notice leaves the machine or goes nowhere.

The rule is held in a context variable, not a thread-local: Apprise runs a service with a
deadline on a pool thread, inside a copy of the caller's context. Code that is not inside
`only_allowed` (everything else in the process) connects as it always did.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import socket
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from crawlsched.errors import UnsafeTarget
from crawlsched.outbound.addresses import (
    IpNetwork,
    Resolver,
    check_addresses,
    literal_addresses,
    resolve,
)


class AddressRefused(ConnectionRefusedError):
    """A connection the rule refused (an OSError, as the libraries expect of a connect)."""


@dataclass
class Guard:
    """The rule in force, and what it refused (read by the caller once the send is over;
    appended to from whichever thread Apprise sends on, hence the lock)."""

    allowed: tuple[IpNetwork, ...]
    resolver: Resolver
    setting: str
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _refused: list[str] = field(default_factory=list)

    def refuse(self, reason: str) -> AddressRefused:
        with self._lock:
            self._refused.append(reason)
        return AddressRefused(f"refused: {reason}")

    @property
    def refused(self) -> list[str]:
        with self._lock:
            return list(self._refused)


_guard: contextvars.ContextVar[Guard | None] = contextvars.ContextVar(
    "outbound_guard", default=None
)
_install_lock = threading.Lock()
_originals: dict[str, Any] = {}


@contextlib.contextmanager
def only_allowed(
    allowed: Sequence[IpNetwork],
    resolver: Resolver = resolve,
    setting: str = "CRAWLSCHED_TARGET_ALLOW_NETWORKS",
) -> Iterator[Guard]:
    """Inside the block, sockets connect and send only to addresses `allowed` admits."""
    _install()
    guard = Guard(tuple(allowed), resolver, setting)
    token = _guard.set(guard)
    try:
        yield guard
    finally:
        _guard.reset(token)


def _checked(sock: socket.socket, address: Any) -> Any:
    """`address` with its host replaced by an address the guard checked (unchanged outside a
    guard); AddressRefused when the guard refuses it."""
    guard = _guard.get()
    if guard is None:
        return address
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        raise guard.refuse(f"a {socket.AddressFamily(sock.family).name} socket ({address!r})")
    try:
        host, port = str(address[0]), int(address[1])
    except (TypeError, ValueError, IndexError):
        raise guard.refuse(f"an address that is no (host, port): {str(address)[:100]!r}") from None
    where = f"//{host}:{port}"
    try:
        addresses = literal_addresses(host) or guard.resolver(host.strip("[]"), port)
        check_addresses(where, addresses, guard.allowed, guard.setting)
    except UnsafeTarget as e:
        raise guard.refuse(str(e)) from None
    chosen = _of_family(addresses, sock.family)
    if chosen is None:
        raise guard.refuse(f"{where!r} has no address of the socket's family")
    return (chosen, port, *tuple(address[2:]))


def _of_family(addresses: Sequence[str], family: int) -> str | None:
    for text in addresses:
        version = ipaddress.ip_address(text.split("%")[0]).version
        if family == socket.AF_INET and version == 4:
            return text
        if family == socket.AF_INET6:
            return text if version == 6 else f"::ffff:{text}"
    return None


def _connect(self: socket.socket, address: Any) -> None:
    return _originals["connect"](self, _checked(self, address))


def _connect_ex(self: socket.socket, address: Any) -> int:
    return _originals["connect_ex"](self, _checked(self, address))


def _sendto(self: socket.socket, data: Any, *rest: Any) -> int:
    # sendto(data, address) or sendto(data, flags, address)
    *flags, address = rest
    return _originals["sendto"](self, data, *flags, _checked(self, address))


def _install() -> None:
    """Wrap the socket methods once per process (idempotent)."""
    with _install_lock:
        if _originals:
            return
        for name, wrapper in (("connect", _connect), ("connect_ex", _connect_ex)):
            _originals[name] = getattr(socket.socket, name)
            setattr(socket.socket, name, wrapper)
        _originals["sendto"] = socket.socket.sendto
        socket.socket.sendto = _sendto  # type: ignore[method-assign]
