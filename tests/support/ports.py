"""Free loopback ports for a process the test starts (bound and released here, so another
process could take one first: a test that loses that race fails saying the port was taken)."""

from __future__ import annotations

import contextlib
import socket


def free_ports(count: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
