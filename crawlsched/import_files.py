"""The rows of an import file (JSON lines or CSV), read one at a time: a bad line is reported
with its number, never raised. Pure: the rows are checked and turned into jobs by
`jobs_input`."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from crawlsched.errors import BadJobInput

JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")
CSV_SUFFIXES = (".csv",)
CSV_TASK_SEPARATOR = ";"


def parse_import_file(path: Path | str) -> Iterator[tuple[int, dict[str, Any] | Exception]]:
    """Rows of a JSON-lines or CSV file as (line number, raw row or why it can't be read).

    Opens the file now (OSError and an unknown extension raise here); a bad line never raises,
    it is yielded as an exception for the caller to report. Blank lines are skipped.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in JSON_LINES_SUFFIXES:
        parse = _json_lines
    elif suffix in CSV_SUFFIXES:
        parse = _csv_rows
    else:
        known = ", ".join(JSON_LINES_SUFFIXES + CSV_SUFFIXES)
        raise BadJobInput(f"cannot import {path.name}: unknown extension; use one of {known}")
    stream = path.open("rb")

    def rows() -> Iterator[tuple[int, dict[str, Any] | Exception]]:
        with stream:
            yield from parse(stream)

    return rows()


FORMATS = {"jsonl": JSON_LINES_SUFFIXES, "csv": CSV_SUFFIXES}
# A line longer than this is rejected, not read on (a row is a few hundred bytes).
MAX_LINE_BYTES = 1024 * 1024
TOO_LONG = b"\0 line too long\n"


def format_of(name: str) -> str:
    """`jsonl` or `csv`, from a file's name; BadJobInput for any other extension."""
    suffix = Path(name).suffix.lower()
    for found, suffixes in FORMATS.items():
        if suffix in suffixes:
            return found
    known = ", ".join(JSON_LINES_SUFFIXES + CSV_SUFFIXES)
    raise BadJobInput(f"cannot import {Path(name).name}: unknown extension; use one of {known}")


def parse_import_lines(
    lines: Iterable[bytes], format: str
) -> Iterator[tuple[int, dict[str, Any] | Exception]]:
    """`parse_import_file` of lines that come as they are read (an upload)."""
    if format not in FORMATS:
        raise BadJobInput(f"format: one of {', '.join(FORMATS)}, got {format!r}")
    return _json_lines(lines) if format == "jsonl" else _csv_rows(lines)


def lines_of(chunks: Iterable[bytes], max_line: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines (with their line break) of a stream of byte chunks. A line longer than
    `max_line` (its break aside) is given as one too-long line, which no parser accepts, and
    never held whole."""
    pending = b""
    skipping = False
    for chunk in chunks:
        pending += chunk
        while (end := pending.find(b"\n")) >= 0:
            line, pending = pending[: end + 1], pending[end + 1 :]
            if skipping:
                skipping = False
                continue
            yield TOO_LONG if len(line) > max_line + 1 else line
        if len(pending) > max_line:
            if not skipping:
                yield TOO_LONG
            skipping, pending = True, b""
    if pending and not skipping:
        yield pending


def _decode(raw: bytes, number: int) -> str:
    text = raw.decode("utf-8", errors="surrogateescape")
    return text.removeprefix("\ufeff") if number == 1 else text


def _json_lines(stream: Iterable[bytes]) -> Iterator[tuple[int, dict[str, Any] | Exception]]:
    for number, raw in enumerate(stream, start=1):
        if not raw.strip():
            continue
        if raw == TOO_LONG:
            yield number, BadJobInput(f"a line longer than {MAX_LINE_BYTES} bytes")
            continue
        try:
            value = json.loads(raw.decode("utf-8").removeprefix("\ufeff"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            yield number, BadJobInput(f"not valid JSON: {e}")
            continue
        if isinstance(value, dict):
            yield number, value
        else:
            yield number, BadJobInput(f"expected a JSON object, got {type(value).__name__}")


def _csv_rows(stream: Iterable[bytes]) -> Iterator[tuple[int, dict[str, Any] | Exception]]:
    lines = (_decode(raw, n) for n, raw in enumerate(stream, start=1))
    reader = csv.reader(lines)
    header: list[str] | None = None
    while True:
        start = reader.line_num + 1
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            yield reader.line_num, BadJobInput(f"not valid CSV: {e}")
            continue
        if not any(cell.strip() for cell in cells):
            continue
        if any(_undecodable(cell) for cell in cells):
            yield start, BadJobInput("not valid UTF-8")
            continue
        if header is None:
            header = [cell.strip() for cell in cells]
            continue
        yield start, _csv_row(header, cells)


def _undecodable(text: str) -> bool:
    return any("\udc80" <= c <= "\udcff" for c in text)


def _csv_row(header: list[str], cells: list[str]) -> dict[str, Any] | Exception:
    if len(cells) > len(header):
        return BadJobInput(f"{len(cells)} cells but the header names {len(header)} columns")
    row: dict[str, Any] = {}
    for name, cell in zip(header, cells, strict=False):
        value = cell.strip()
        if not value:
            continue  # an empty cell means "use the default"
        if name == "tasks":
            row[name] = [t.strip() for t in value.split(CSV_TASK_SEPARATOR) if t.strip()]
        else:
            row[name] = value
    return row
