"""The README's walk-through, read as a newcomer reads it: the fenced block after each
`<!-- walk-through: NAME -->` marker, and the expectations its comments state."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MARKER = re.compile(r"<!-- walk-through: ([a-z0-9 ]+) -->\s*```bash\n(.*?)```", re.S)
REPEAT = re.compile(r"#\s*repeat until it shows:\s*(.+?)\s*$")
PRINTS = re.compile(r"#\s*prints:\s*(.+?)\s*$")
SHOWS = re.compile(r"#\s*shows:\s*(.+?)\s*$")
EXPORT = re.compile(r"(?<![\w$])([A-Z_][A-Z0-9_]*)=(\S+)")


@dataclass(frozen=True)
class Line:
    command: str  # as written, comment and all (bash drops the comment)
    repeat_until: str | None  # repeat until the output shows this
    prints: str | None  # the output, exactly
    shows: str | None = None  # what the output holds


def blocks(readme: Path) -> dict[str, str]:
    return {name: body for name, body in MARKER.findall(readme.read_text())}


def lines(block: str) -> list[Line]:
    found = []
    for raw in block.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        repeat, prints, shows = REPEAT.search(raw), PRINTS.search(raw), SHOWS.search(raw)
        found.append(
            Line(
                raw,
                repeat.group(1) if repeat else None,
                prints.group(1) if prints else None,
                shows.group(1) if shows else None,
            )
        )
    return found


def with_values(block: str, values: dict[str, str]) -> str:
    """The environment block with the given variables' values replaced (and only those: a
    name the block does not set is an error, so the test changes nothing the README lacks)."""
    declared = {name for name, _ in EXPORT.findall(block)}
    missing = set(values) - declared
    if missing:
        raise AssertionError(f"the README's environment block sets no {sorted(missing)}")
    return EXPORT.sub(
        lambda m: f"{m.group(1)}={values[m.group(1)]}" if m.group(1) in values else m.group(0),
        block,
    )
