"""`crawl -o FILE`: the items a run stores, written as the store holds them (every field, as
`results --json` shows them): JSON lines as they arrive, or a JSON array or CSV at the end.
An item stored again in the same run keeps its first line in JSON lines, its last version in
the others."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, TextIO

from crawlsched.cli import ops
from crawlsched.cli.backend import Backend

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv"}


def format_of(path: str) -> str | None:
    return FORMATS.get(Path(path).suffix.lower())


class Exporter:
    """Polls the run's items (`GET /v1/runs/{run}/items?since=…`) and writes the new ones."""

    def __init__(self, api: Backend, run_id: str, path: Path) -> None:
        self.api, self.run_id, self.path = api, run_id, path
        self.format = FORMATS[path.suffix.lower()]
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.since: str | None = None
        self.out: TextIO = path.open("w", encoding="utf-8", newline="")

    def poll(self) -> None:
        """Fetch what was stored since the last poll; write the new items (JSON lines)."""
        found = self.api.items(ops.RUN_ITEMS, 10_000_000, run_id=self.run_id, since=self.since)
        for item in found:
            key = (str(item.get("model")), str(item.get("key")))
            if key not in self.items and self.format == "jsonl":
                self.out.write(json.dumps(item) + "\n")
            self.items[key] = item
            seen = item.get("last_seen")
            if isinstance(seen, str) and (self.since is None or seen > self.since):
                self.since = seen
        self.out.flush()

    def finish(self) -> int:
        """The last poll, and the file closed; how many items it holds."""
        try:
            self.poll()
            if self.format == "json":
                json.dump(list(self.items.values()), self.out, indent=1)
                self.out.write("\n")
            elif self.format == "csv":
                self._csv()
        finally:
            self.out.close()
        return len(self.items)

    def _csv(self) -> None:
        columns: dict[str, None] = {}
        for item in self.items.values():
            columns.update(dict.fromkeys(item))
        writer = csv.DictWriter(self.out, fieldnames=list(columns))
        writer.writeheader()
        for item in self.items.values():
            writer.writerow({k: _cell(v) for k, v in item.items()})


def _cell(value: Any) -> Any:
    """A CSV cell: nested values as JSON, nothing as empty."""
    if value is None:
        return ""
    return json.dumps(value) if isinstance(value, dict | list) else value
