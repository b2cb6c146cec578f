"""A folder as a stream of gzipped tar bytes, and such a stream unpacked into a folder with a
bound on what it writes: how `store dump` and `store load` move a mongodump folder between a
caller and a server, in chunks, never held whole.

Unpacking takes regular files only (no links, devices or folders named outside the target:
tarfile's `data` filter), at most `max_files` of them, and stops with a ValueError as soon as
the files would pass `max_bytes` in all (a few kilobytes of gzip can say gigabytes)."""

from __future__ import annotations

import tarfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

CHUNK = 256 * 1024
MAX_FILES = 10_000


class _Collected:
    """A write-only file whose bytes are taken out as they come (the tar's output)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        data, self.parts = b"".join(self.parts), []
        return data


def tar_chunks(folder: Path) -> Iterator[bytes]:
    """The regular files under `folder` (names relative to it), as gzipped tar bytes."""
    out = _Collected()
    with tarfile.open(fileobj=out, mode="w|gz") as tar:  # type: ignore[arg-type]
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or path.is_symlink():
                continue
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(folder)))
            with path.open("rb") as content:
                tar.addfile(info, content)
            if data := out.take():
                yield data
    if data := out.take():
        yield data


class _Chunks:
    """A read-only file over an iterator of byte chunks (what tarfile's stream mode reads)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._buffer = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buffer += chunk
        if size < 0:
            data, self._buffer = self._buffer, b""
        else:
            data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data


def untar_bounded(
    chunks: Iterable[bytes], folder: Path, max_bytes: int | None, max_files: int = MAX_FILES
) -> int:
    """Unpack gzipped tar bytes into `folder`; the bytes written. ValueError for anything
    but regular files, a name outside `folder`, or more than the bounds allow."""
    folder.mkdir(parents=True, exist_ok=True)
    written = files = 0
    try:
        with tarfile.open(fileobj=_Chunks(chunks), mode="r|gz") as tar:  # type: ignore[arg-type]
            for member in tar:
                if not member.isfile():
                    raise ValueError(f"the archive holds {member.name!r}, not a regular file")
                files += 1
                written += member.size
                if files > max_files:
                    raise ValueError(f"the archive holds more than {max_files} files")
                if max_bytes is not None and written > max_bytes:
                    raise ValueError(
                        f"the archive unpacks to more than {max_bytes} bytes "
                        "(CRAWLSCHED_API_MAX_UNPACKED_BYTES)"
                    )
                tar.extract(member, folder, filter="data")
    except tarfile.FilterError as e:
        raise ValueError(f"the archive names a file outside its folder: {e}") from None
    except (tarfile.TarError, EOFError, zlib.error) as e:
        raise ValueError(f"not a gzipped tar archive of a folder: {e}") from None
    return written
