"""What a report key counted on its run (`tally.<key>`), as one comparable string, and the
`$inc` a report applies: `MongoRunStore.report` counts a later report of a key by the
difference from what the key counted before."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def report_inc(counts: Mapping[str, int], discovered: int) -> dict[str, float]:
    inc: dict[str, float] = {
        "outstanding": discovered - sum(counts.values()),
        "discovered": discovered,
    }
    for outcome, n in counts.items():
        inc[f"counts.{outcome}"] = n
    return inc


def tally(counts: Mapping[str, int], discovered: int) -> str:
    """What a report key counted, as one comparable string: `d=2;exhausted=1;succeeded=3`."""
    return ";".join([f"d={discovered}", *(f"{o}={n}" for o, n in sorted(counts.items()) if n)])


def read_tally(run: Mapping[str, Any] | None, key: str) -> tuple[dict[str, int], int] | None:
    """The counts and children a key counted; None when the key was never applied, or was
    applied by an older version that kept no tally."""
    text = ((run or {}).get("tally") or {}).get(_field_name(key))
    if not isinstance(text, str):
        return None
    counts: dict[str, int] = {}
    for part in text.split(";"):
        name, _, n = part.partition("=")
        counts[name] = int(n) if n.isdigit() else 0
    discovered = counts.pop("d", 0)
    return counts, discovered


def _field_name(key: str) -> str:
    # Report keys are `<32 hex>:<phase>`; a dot or a dollar would break the field path.
    return key.replace(".", "\uff0e").replace("$", "\uff04")


def key_of_field(name: str) -> str:
    return name.replace("\uff0e", ".").replace("\uff04", "$")


def tally_field(key: str) -> str:
    return f"tally.{_field_name(key)}"
