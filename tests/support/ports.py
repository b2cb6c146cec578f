"""Free loopback ports for a process the test starts.

A port is bound and released here, so another process could take it first. `bind(0)` would
hand out a port from the kernel's ephemeral range, the same range every outgoing connection
of the machine takes its source port from: with tests running in parallel, one of their
connections took such a port before the server meant for it could bind (CI saw "Address
already in use"). The ports come instead from below that range, drawn at random and each
checked by binding it."""

from __future__ import annotations

import contextlib
import random
import socket
from collections.abc import Iterator
from pathlib import Path

LOWEST = 20_000
FALLBACK_EPHEMERAL_START = 32_768  # Linux's default when /proc does not say


def ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (outgoing connections' source ports)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return FALLBACK_EPHEMERAL_START


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports nothing listens on now, outside the ephemeral range."""
    highest = ephemeral_start() - 1
    chosen: list[int] = []
    with contextlib.ExitStack() as stack:  # held until all are chosen: no port twice
        for _ in range(count * 200):
            if len(chosen) == count:
                break
            port = random.randint(LOWEST, highest) if highest > LOWEST else 0
            sock = stack.enter_context(socket.socket())
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            chosen.append(sock.getsockname()[1])
    if len(chosen) < count:
        raise RuntimeError(f"found {len(chosen)} free ports of {count} below {highest + 1}")
    return chosen


def free_port() -> int:
    """One loopback port nothing listens on now, outside the ephemeral range (for a server a
    test starts in another process or thread)."""
    return free_ports(1)[0]


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port that refuses every connection while the block runs: bound here and
    never listening, so no server the test starts meanwhile can take it (a port only found
    free and released was once taken by the test's own proxy, which answered 400)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]
