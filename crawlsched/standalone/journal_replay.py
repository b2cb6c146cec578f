"""Replay the journal files written after a snapshot onto the store it was loaded into.

Files are read in order and their records applied in order. The first file that does not
end whole stops the replay after its last whole record: a torn end of the last file (a crash
mid-write) is the normal end of a killed server's journal and is only noted; anything else —
a corrupt record, a torn file with later files behind it, a record that does not fit the
store — is logged as `journal_replay_stopped` with the file, the record and why, and the
store keeps what came before. Never fatal: the server starts on what could be read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import bson

from crawlsched.logs import get_logger
from crawlsched.standalone.journal import journal_numbers, journal_path
from crawlsched.standalone.journal_format import read_frames
from crawlsched.store.counting import CountingDatabase
from crawlsched.store.embedded.replay import BadRecord, apply_record

log = get_logger(__name__)

# As the snapshot's documents are read (`dump.read_documents`).
CODEC = bson.CodecOptions(document_class=dict, tz_aware=True)


@dataclass
class ReplayReport:
    files: list[str] = field(default_factory=list)
    records: int = 0
    torn_tail: bool = False  # the last file ended mid-record (a crash mid-write)
    stopped: str | None = None  # why replay stopped before the end, if it did

    @property
    def summary(self) -> dict:
        return {
            "files": len(self.files),
            "records": self.records,
            "torn_tail": self.torn_tail,
            "stopped": self.stopped,
        }


def replay_journals(db: CountingDatabase, folder: Path, since: int) -> ReplayReport:
    """Apply the records of every journal file numbered `since` or above, under the store's
    lock (nothing else runs during a start's replay; this keeps it so)."""
    report = ReplayReport()
    numbers = [n for n in journal_numbers(folder) if n >= since]
    with db.locked():
        for i, number in enumerate(numbers):
            path = journal_path(folder, number)
            report.files.append(path.name)
            if not _replay_file(db, path, report, last=i == len(numbers) - 1):
                skipped = [journal_path(folder, n).name for n in numbers[i + 1 :]]
                log.warning(
                    "journal_replay_stopped",
                    file=path.name,
                    reason=report.stopped,
                    records_applied=report.records,
                    files_skipped=skipped,
                )
                break
    return report


def _replay_file(db: CountingDatabase, path: Path, report: ReplayReport, last: bool) -> bool:
    """Apply one file's whole records; False when replay must stop here."""
    frames = read_frames(path.read_bytes())
    for index, payload in enumerate(frames.payloads):
        try:
            entries = bson.decode(payload, CODEC)["w"]
            apply_record(db.raw, entries)
        except (BadRecord, bson.errors.BSONError, KeyError, TypeError) as e:
            report.stopped = f"{path.name}: record {index + 1} does not apply: {e}"
            return False
        report.records += 1
    if frames.end == "whole":
        return True
    if frames.end == "torn" and last:
        report.torn_tail = True
        log.info("journal_tail_ignored", file=path.name, detail=frames.describe())
        return True
    report.stopped = f"{path.name}: {frames.describe()}"
    return False
