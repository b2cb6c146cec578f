"""How a run ended, from its counts: the state it is left in and the event that says so.

Pure: no store, no clock. A stopped run is `stopped` whatever its counts. Otherwise a run is
`finished`, and its event is `RunFailed` when jobs ran and none succeeded (every one failed,
exhausted its attempts or expired), `RunFinished` when any succeeded or nothing had to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from crawlsched.planning.outcomes import Outcome

FAILURES = (Outcome.FAILED, Outcome.EXHAUSTED, Outcome.EXPIRED)


@dataclass(frozen=True)
class RunEnd:
    state: str  # "finished" or "stopped": what `run status` shows
    result: str  # "succeeded", "failed" or "stopped"
    event: str  # RunFinished, RunFailed or RunStopped


def run_end(counts: Mapping[str, int], stop_requested: bool) -> RunEnd:
    if stop_requested:
        return RunEnd("stopped", "stopped", "RunStopped")
    failed = sum(max(counts.get(o, 0), 0) for o in FAILURES)
    if failed and counts.get(Outcome.SUCCEEDED, 0) <= 0:
        return RunEnd("finished", "failed", "RunFailed")
    return RunEnd("finished", "succeeded", "RunFinished")
