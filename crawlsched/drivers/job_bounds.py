"""A job's own discovery bounds, over its media's: `max_depth` (links deep from the job) and
`max_pages` (pages its crawl may discover in one run), read from the job document and handed
down to every page it discovers, with the planned job they started from (`seed_job`).

Pure: no store, no broker. A value that is not a whole number >= 0 is ignored (the media's
bound holds), so a document edited by hand cannot lift a bound by accident.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

BOUND_FIELDS = ("max_depth", "max_pages")
SEED_FIELD = "seed_job"


def own_bounds(document: Mapping[str, Any]) -> dict[str, int]:
    """The bounds the job document sets for itself (none: the media's hold)."""
    return {
        name: value
        for name in BOUND_FIELDS
        if isinstance(value := document.get(name), int) and not isinstance(value, bool)
        and value >= 0
    }  # fmt: skip


def handed_down(document: Mapping[str, Any], job_id: Any) -> dict[str, Any]:
    """What a page discovered by this job carries: the job's own bounds and the planned job
    they began at (this job, unless it was discovered itself). Empty without bounds."""
    own = own_bounds(document)
    if not own:
        return {}
    return {**own, SEED_FIELD: document.get(SEED_FIELD, job_id)}


def seed_key(seed: Any) -> str:
    """A field name for the run's count of pages discovered from one planned job."""
    return hashlib.sha256(str(seed).encode()).hexdigest()[:24]
