"""The journal file's format: a magic line, then one frame per record.

    frame = length · length's complement · CRC-32 of the payload · payload
            (three little-endian 4-byte words, then `length` bytes)

The length is written twice so that a damaged length is told from a frame cut short: with
one copy, a length damaged upward would read as a frame that runs past the end of the file.

Reading stops at the first frame that is not whole:
- **torn**: the file ends inside a frame, or its last frame fails its CRC, or what follows the
  last whole frame is only zero bytes. A process killed mid-write, or a power loss before the
  OS wrote a frame's pages, leaves that. What came before is kept, the rest ignored.
- **corrupt**: a frame whose two lengths disagree, or which fails its CRC with more bytes
  after it. Replay stops there too, keeping what came before: a record after a lost one would
  be applied to a store that never held what the lost one wrote.

Pure: bytes in, frames out.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Literal

MAGIC = b"crawlsched journal 1\n"
HEADER = struct.Struct("<III")
_WORD = 0xFFFFFFFF
End = Literal["whole", "torn", "corrupt"]


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload), len(payload) ^ _WORD, zlib.crc32(payload)) + payload


@dataclass(frozen=True)
class Frames:
    payloads: list[bytes]
    end: End
    offset: int  # where reading stopped: the end of the last whole frame
    ignored: int  # bytes after it

    def describe(self) -> str:
        if self.end == "whole":
            return f"{len(self.payloads)} records"
        what = "a torn last record" if self.end == "torn" else "a corrupt record"
        return (
            f"{len(self.payloads)} records, then {what} at byte {self.offset} "
            f"({self.ignored} bytes ignored)"
        )


def read_frames(data: bytes) -> Frames:
    """The whole frames at the start of a journal file, and how it ends."""
    size = len(data)
    if not data.startswith(MAGIC):
        # Empty, or cut inside the magic line: a file made just before the process died.
        cut = MAGIC.startswith(data) or _zeros(data, 0)
        return Frames([], "whole" if not data else "torn" if cut else "corrupt", 0, size)
    payloads: list[bytes] = []
    position = len(MAGIC)
    while position < size:
        length = _whole_frame(data, position)
        if length is None:
            end: End = "torn" if _torn(data, position) else "corrupt"
            return Frames(payloads, end, position, size - position)
        start = position + HEADER.size
        payloads.append(data[start : start + length])
        position = start + length
    return Frames(payloads, "whole", position, 0)


def _whole_frame(data: bytes, position: int) -> int | None:
    """The payload length of the whole frame at `position`, or None."""
    if len(data) - position < HEADER.size:
        return None
    length, check, crc = HEADER.unpack_from(data, position)
    start = position + HEADER.size
    if not length or check != length ^ _WORD or start + length > len(data):
        return None
    return length if zlib.crc32(data[start : start + length]) == crc else None


def _torn(data: bytes, position: int) -> bool:
    """Whether the bad frame at `position` is the file's torn end: cut short, the last one,
    or followed by zeros only (pages the OS had not written yet)."""
    if len(data) - position < HEADER.size or _zeros(data, position):
        return True
    length, check, _ = HEADER.unpack_from(data, position)
    if check != length ^ _WORD:
        return False  # a whole header, damaged
    return position + HEADER.size + length >= len(data)


def _zeros(data: bytes, position: int) -> bool:
    return not data[position:].strip(b"\0")
