"""How a run ended, from its counts: the state it is left in and the event that says so.

Pure: no store, no clock. A stopped run is `stopped` whatever its counts. Otherwise a run is
`finished`, and its result says whether every page ended on its own merits:
- `incomplete` (`RunIncomplete`): the machinery failed some page on every try the run allows,
  so it was given up (`expired`) — whatever else happened, the run did not see every page;
- `failed` (`RunFailed`): jobs ran and none succeeded (each failed or exhausted its attempts);
- `succeeded` (`RunFinished`): any succeeded, or nothing had to run. Pages cut by a bound the
  user set, and pages that failed on their own, are counted and do not change this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from crawlsched.planning.outcomes import Outcome

FAILURES = (Outcome.FAILED, Outcome.EXHAUSTED)


@dataclass(frozen=True)
class RunEnd:
    state: str  # "finished" or "stopped": what `run status` shows
    result: str  # "succeeded", "failed", "incomplete" or "stopped"
    event: str  # RunFinished, RunFailed, RunIncomplete or RunStopped


def run_end(counts: Mapping[str, int], stop_requested: bool) -> RunEnd:
    if stop_requested:
        return RunEnd("stopped", "stopped", "RunStopped")
    if counts.get(Outcome.EXPIRED, 0) > 0 or counts.get(Outcome.GIVEN_UP, 0) > 0:
        return RunEnd("finished", "incomplete", "RunIncomplete")
    failed = sum(max(counts.get(o, 0), 0) for o in FAILURES)
    if failed and counts.get(Outcome.SUCCEEDED, 0) <= 0:
        return RunEnd("finished", "failed", "RunFailed")
    return RunEnd("finished", "succeeded", "RunFinished")
