"""The rows of an import file (JSON lines or CSV), read one at a time: a bad line is reported
with its number, never raised. Pure: the rows are checked and turned into jobs by
`jobs_input`."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

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


def _decode(raw: bytes, number: int) -> str:
    text = raw.decode("utf-8", errors="surrogateescape")
    return text.removeprefix("\ufeff") if number == 1 else text


def _json_lines(stream: BinaryIO) -> Iterator[tuple[int, dict[str, Any] | Exception]]:
    for number, raw in enumerate(stream, start=1):
        if not raw.strip():
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


def _csv_rows(stream: BinaryIO) -> Iterator[tuple[int, dict[str, Any] | Exception]]:
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
