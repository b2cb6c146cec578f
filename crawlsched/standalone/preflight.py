"""What a standalone server checks before it sets anything up: a data directory it can keep
data in, and a port it can listen on. Each problem is one line naming the setting to change."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from crawlsched.errors import CrawlschedError

# Kernel file systems: no folder there holds files of anyone's.
KERNEL_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))


class CannotStart(CrawlschedError):
    """A standalone server cannot start as set up; `code` is its exit code (README)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def check_data_dir(root: Path) -> None:
    """A folder the server can make and write, or CannotStart (exit 2: a bad setting)."""
    where = f"CRAWLSCHED_DATA_DIR={root}"
    resolved = root.resolve()
    kernel = [k for k in KERNEL_ROOTS if k == resolved or k in resolved.parents]
    if kernel:
        raise CannotStart(
            f"{where} is under {kernel[0]}, which holds no files: set CRAWLSCHED_DATA_DIR to "
            "a folder on a disk",
            2,
        )
    if root.exists() and not root.is_dir():
        raise CannotStart(
            f"{where} is a file, not a folder: set CRAWLSCHED_DATA_DIR to a folder (it is made "
            "if missing)",
            2,
        )
    existing = next((p for p in (resolved, *resolved.parents) if p.exists()), Path("/"))
    if not existing.is_dir():
        raise CannotStart(
            f"{where} cannot be made: {existing} is a file; set CRAWLSCHED_DATA_DIR to a folder",
            2,
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise CannotStart(
            f"{where} cannot be written ({existing} is not writable by this user): set "
            "CRAWLSCHED_DATA_DIR to a folder you own",
            2,
        )


def check_port(host: str, port: int) -> None:
    """The address is free to listen on, or CannotStart (exit 1). Port 0 takes any free one."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise CannotStart(
            f"CRAWLSCHED_API_HOST={host} is no address to listen on ({e.strerror}): set "
            "CRAWLSCHED_API_HOST (or --host), e.g. 127.0.0.1",
            2,
        ) from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as e:
            why = "in use" if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
            raise CannotStart(
                f"port {port} on {host} is {why} (CRAWLSCHED_API_PORT): stop what listens "
                f"there, or choose another port with CRAWLSCHED_API_PORT or --port",
                1,
            ) from None
