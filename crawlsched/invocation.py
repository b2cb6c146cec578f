"""Who a command runs for, handed to it once: the local user, or a remote caller of the API.

A local command may name this machine's files and environment, and reach whatever this
machine reaches. A remote command (`POST /v1/cli`) reaches the store only: every file it reads
arrives with the request as an upload (`@upload:NAME`), every file or folder it writes goes
back as a download, a path on the server and the server's environment are refused
(`RemoteRefused`: the API answers 400 and nothing changed), and every request the server makes
for it goes only where a crawl may go (`drivers.targets`, CRAWLSCHED_TARGET_ALLOW_NETWORKS).

Commands ask their `Invocation` (`reads`, `writes`, `environment`, `outbound`, `http_client`)
instead of checking where they run: the difference lives here and nowhere else.
"""

from __future__ import annotations

import base64
import io
import os
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import httpx

UPLOAD_PREFIX = "@upload:"


class RemoteRefused(Exception):
    """What a remote caller may not do; raised before the command changes anything."""


@dataclass(frozen=True)
class Invocation:
    """`remote`: the command runs for a caller of the API. `files`: for a remote command, the
    server's temporary file (or folder) behind each `@upload:NAME` it was sent or asked back."""

    remote: bool = False
    files: Mapping[str, Path] = field(default_factory=lambda: MappingProxyType({}))

    def reads(self, value: str, what: str) -> Path:
        """The file a command reads for the argument `value`: a local path, or an upload."""
        return self._file(value, what) if self.remote else Path(value)

    def writes(self, value: str, what: str) -> Path:
        """The file (or folder) a command writes for `value`: a local path, or a download."""
        return self._file(value, what) if self.remote else Path(value)

    def reads_folder(self, value: str, what: str) -> Path:
        """A folder a command reads: a local path, or an uploaded archive (`pack_folder`)
        unpacked beside it on the server."""
        if not self.remote:
            return Path(value)
        archive = self._file(value, what)
        folder = archive.with_name(archive.name + ".d")
        if not folder.is_dir():
            try:
                unpack_folder(archive.read_text(), folder)
            except (ValueError, tarfile.TarError, OSError) as e:
                raise RemoteRefused(f"{what}: {value} is not a folder archive: {e}") from None
        return folder

    def environment(self, name: str, what: str) -> str:
        """A variable of this process's environment (refused to a remote caller, whatever the
        name: the answer must not say which variables the server has)."""
        if self.remote:
            raise RemoteRefused(
                f"{what}: a remote command cannot read the server's environment; send the "
                f"value as a file ({UPLOAD_PREFIX}NAME)"
            )
        return os.environ.get(name, "")

    def outbound(self, url: str, allowed_networks: Sequence) -> None:
        """Refuse a URL the server may not reach for a remote caller (as a crawl may not)."""
        if not self.remote:
            return
        from crawlsched.drivers.targets import check_target
        from crawlsched.errors import UnsafeTarget

        try:
            check_target(url, allowed_networks)
        except UnsafeTarget as e:
            raise RemoteRefused(str(e)) from None

    def http_client(self, allowed_networks: Sequence, timeout_s: float) -> httpx.Client:
        """The client of requests made for this caller: for a remote one, it connects only to
        addresses it checked itself (no DNS rebinding between `outbound` and the request)."""
        if not self.remote:
            return httpx.Client(timeout=timeout_s)
        from crawlsched.drivers.net import guarded_client

        return guarded_client(tuple(allowed_networks), timeout_s)

    def _file(self, value: str, what: str) -> Path:
        name = value.removeprefix(UPLOAD_PREFIX)
        if value.startswith(UPLOAD_PREFIX) and name in self.files:
            return self.files[name]
        if value.startswith(UPLOAD_PREFIX):
            raise RemoteRefused(f"{what}: no file {name!r} was sent with the command")
        raise RemoteRefused(
            f"{what}: a remote command cannot name a path on the server ({value[:200]!r}); "
            f"send the file with the command as {UPLOAD_PREFIX}NAME"
        )


LOCAL = Invocation()


def pack_folder(folder: Path) -> str:
    """A folder as text (base64 of a gzipped tar), to travel as an upload or a download."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink():
                tar.add(path, arcname=str(path.relative_to(folder)), recursive=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def unpack_folder(text: str, folder: Path) -> None:
    """`pack_folder`'s text back into `folder`: regular files only, nothing outside it."""
    data = base64.b64decode(text.encode("ascii"), validate=True)
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            if not member.isfile():
                raise ValueError(f"{member.name!r} is not a regular file")
        tar.extractall(folder, filter="data")
