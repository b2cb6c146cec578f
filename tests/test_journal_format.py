"""The journal file's frames (`standalone/journal_format.py`) and its writer
(`standalone/journal.py`): what is written whole reads back whole; a file cut anywhere reads
back the frames before the cut and says it is torn; a damaged frame with more after it is
corrupt, and what came before it is kept."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.standalone import journal
from crawlsched.standalone.journal import JournalWriter, journal_path, remove_journals_before
from crawlsched.standalone.journal_format import HEADER, MAGIC, frame, read_frames

payloads = st.lists(st.binary(min_size=1, max_size=40), max_size=8)
examples = settings(deadline=None, max_examples=200)


def _file(records: list[bytes]) -> tuple[bytes, list[int]]:
    """A journal file of `records`, and the offset where each frame ends."""
    data, ends = MAGIC, []
    for payload in records:
        data += frame(payload)
        ends.append(len(data))
    return data, ends


@given(records=payloads)
@examples
def test_frames_written_whole_read_back_whole(records):
    data, _ = _file(records)
    read = read_frames(data)
    assert (read.payloads, read.end, read.offset, read.ignored) == (records, "whole", len(data), 0)


@given(records=payloads, cut=st.integers(0))
@examples
def test_a_file_cut_anywhere_keeps_the_frames_before_the_cut(records, cut):
    data, ends = _file(records)
    keep = cut % (len(data) + 1)
    read = read_frames(data[:keep])
    whole = [end for end in ends if end <= keep]
    assert read.payloads == records[: len(whole)]
    at_a_boundary = keep in (0, len(MAGIC), *ends)
    assert read.end == ("whole" if at_a_boundary else "torn")


@given(records=payloads, zeros=st.integers(1, 5000))
@examples
def test_zeros_after_the_last_frame_are_a_torn_end(records, zeros):
    data, _ = _file(records)
    read = read_frames(data + bytes(zeros))
    assert (read.payloads, read.end, read.ignored) == (records, "torn", zeros)


@given(records=st.lists(st.binary(min_size=1, max_size=40), min_size=2, max_size=8),
       which=st.integers(0), offset=st.integers(0), mask=st.integers(1, 255))  # fmt: skip
@examples
def test_a_damaged_frame_before_the_last_is_corrupt_and_keeps_what_came_before(
    records, which, offset, mask
):
    data, ends = _file(records)
    damaged_frame = which % (len(records) - 1)
    start = ends[damaged_frame - 1] if damaged_frame else len(MAGIC)
    position = start + offset % (ends[damaged_frame] - start)
    damaged = bytearray(data)
    damaged[position] ^= mask
    read = read_frames(bytes(damaged))
    assert read.payloads == records[:damaged_frame]
    assert read.end == "corrupt"
    assert read.offset == start


def test_a_file_that_is_not_a_journal_is_corrupt():
    assert read_frames(b"something else entirely").end == "corrupt"
    assert read_frames(b"").end == "whole"
    assert read_frames(MAGIC[:4]).end == "torn"


def test_a_frame_without_a_payload_is_never_written_nor_read():
    data = MAGIC + HEADER.pack(0, 0xFFFFFFFF, 0) + frame(b"x")
    assert read_frames(data).end == "corrupt"


# -- the writer -----------------------------------------------------------------------------


def test_the_writer_appends_frames_and_starts_a_new_file_on_rotate(tmp_path: Path):
    writer = JournalWriter(tmp_path, 7)
    writer.append(b"one")
    writer.rotate(9)
    writer.append(b"two")
    writer.close()
    assert read_frames(journal_path(tmp_path, 7).read_bytes()).payloads == [b"one"]
    assert read_frames(journal_path(tmp_path, 9).read_bytes()).payloads == [b"two"]
    assert oct(journal_path(tmp_path, 9).stat().st_mode & 0o777) == "0o600"
    remove_journals_before(tmp_path, 9)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["000009.log"]


def test_a_sync_flushes_what_was_appended_once_and_older_files_first(tmp_path, monkeypatch):
    flushed: list[str] = []
    monkeypatch.setattr(journal.os, "fsync", lambda fd: flushed.append(f"fsync {_name(fd)}"))
    monkeypatch.setattr(journal.os, "fdatasync", lambda fd: flushed.append(_name(fd)))
    writer = JournalWriter(tmp_path, 1)
    writer.append(b"a")
    writer.rotate(2)
    writer.append(b"b")
    writer.sync()
    assert flushed == ["fsync 000001.log", "000002.log", f"fsync {tmp_path.name}"]
    # Nothing appended since: a second sync has nothing to flush
    flushed.clear()
    writer.sync()
    assert flushed == []
    writer.append(b"c")
    writer.sync()
    assert flushed == ["000002.log"]


def _name(fd: int) -> str:
    return Path(os.readlink(f"/proc/self/fd/{fd}")).name


def test_an_append_that_fails_half_way_leaves_no_half_record_and_no_gap(tmp_path, monkeypatch):
    writer = JournalWriter(tmp_path, 1)
    writer.append(b"kept")
    real_write = os.write

    def disk_full(fd: int, data) -> int:
        real_write(fd, bytes(data[:5]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal.os, "write", disk_full)
    with pytest.raises(OSError):
        writer.append(b"lost in the middle")
    monkeypatch.undo()
    # No record may follow a lost one in its file: refused until a snapshot cuts the journal
    with pytest.raises(OSError, match="waiting for a snapshot"):
        writer.append(b"refused")
    writer.rotate(2)
    writer.append(b"after the snapshot")
    writer.close()
    read = read_frames(journal_path(tmp_path, 1).read_bytes())
    assert (read.payloads, read.end) == ([b"kept"], "whole")
    assert read_frames(journal_path(tmp_path, 2).read_bytes()).payloads == [b"after the snapshot"]
