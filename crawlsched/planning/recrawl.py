"""How long until a recurring job is crawled again: at the pace its page changes.

The rule, after each successful crawl:

- *fixed* policy (a media that does not say `adaptive`): the job's configured `interval_s`,
  exactly as before; no jitter.
- *adaptive*, method `estimate` (the default; Cho & Garcia-Molina's idea, estimating a page's
  Poisson change rate from crawls that did or did not see a change): the job keeps a belief
  over its page's change rate λ (`planning.change_rate`: weights over a fixed grid of rates).
  Without one (a new job, an older or malformed state) the belief is log-normal with mean
  rate `interval_per_mean / current interval` (the configured one at first), so the interval
  starts where it was. A crawl that saw items and follows an earlier one, `t` seconds later
  (`now - updated_at`; the current interval when that is unknown or not positive), tempers the
  weights by `memory` and multiplies each by `1 - exp(-λ t)` if it saw a change (any item new
  or changed), by `exp(-λ t)` if none; the interval becomes `interval_per_mean / mean λ`, i.e.
  `interval_per_mean` times the estimated mean time between changes, but never longer than
  before after a change nor shorter after none (`same_direction`). A first crawl (nothing to
  compare with) and a crawl that saw no item (no evidence) leave belief and interval as they
  were.
- *adaptive*, method `steps` (Nutch's AdaptiveFetchSchedule): the current interval (the
  configured one at the first crawl) times `1 - dec_rate` after a change, `1 + inc_rate` after
  items none of which changed, unchanged after no item.

Either result is clamped to `[min_interval_s, max_interval_s]`. From the same state a change
never gives a longer interval than no change (a change is likelier at higher rates, so it
never lowers the estimated rate). Why twice the mean: docs/design.md, "Recrawl at the pace
each page changes". Jitter is a separate step (`jittered`): the next visit is moved by up to
±`jitter` of the interval, drawn from an injected source (`draw_for`: deterministic per job
and visit), so that jobs that started together drift apart; the jittered delay stays within
the bounds and is never stored as the interval, so it does not accumulate.

Pure: no clock (`now` is an argument), no store, no broker.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from crawlsched.planning import change_rate
from crawlsched.planning.outcomes import JobUpdate, Outcome

FIXED = "fixed"
ADAPTIVE = "adaptive"
ESTIMATE = "estimate"
STEPS = "steps"
DEFAULT_MIN_INTERVAL_S = 3600.0  # one hour
DEFAULT_MAX_INTERVAL_S = 30 * 86400.0  # thirty days


@dataclass(frozen=True)
class Evidence:
    """What the last crawl of a job found: its saved items, counted by the result store."""

    new: int = 0
    changed: int = 0
    unchanged: int = 0

    @classmethod
    def of(cls, counts: Mapping[str, Any]) -> Evidence:
        def count(key: str) -> int:
            value = counts.get(key)
            return value if isinstance(value, int) and value > 0 else 0

        return cls(count("new"), count("changed"), count("unchanged"))

    @property
    def saw_change(self) -> bool:
        return self.new + self.changed > 0

    @property
    def seen(self) -> int:
        return self.new + self.changed + self.unchanged


@dataclass(frozen=True)
class RecrawlPolicy:
    adaptive: bool = False
    min_interval_s: float = DEFAULT_MIN_INTERVAL_S
    max_interval_s: float = DEFAULT_MAX_INTERVAL_S
    # `steps` only: Nutch's default rates are +0.4 / -0.2; a smaller decrease (the settings'
    # default) kept changes from waiting longer than under fixed intervals in the benchmark.
    inc_rate: float = 0.4
    dec_rate: float = 0.1
    jitter: float = 0.0  # fraction of the interval, each way
    method: str = ESTIMATE  # or STEPS
    # `estimate` only: the interval in mean times between changes, and how much of the belief
    # a crawl keeps (1: all; < 1 forgets, so that a page whose pace changes is followed)
    interval_per_mean: float = 2.0
    memory: float = 0.95

    def __post_init__(self) -> None:
        numbers = ("min_interval_s", "max_interval_s", "interval_per_mean", "memory")
        for name in (*numbers, "inc_rate", "dec_rate", "jitter"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if self.min_interval_s <= 0:
            raise ValueError(f"min_interval_s must be > 0, got {self.min_interval_s}")
        if self.max_interval_s < self.min_interval_s:
            raise ValueError(
                f"max_interval_s ({self.max_interval_s}) must be >= min_interval_s "
                f"({self.min_interval_s})"
            )
        if self.method not in (ESTIMATE, STEPS):
            raise ValueError(f"method must be {ESTIMATE!r} or {STEPS!r}, got {self.method!r}")
        if not 0 < self.interval_per_mean <= 100:
            raise ValueError(
                f"interval_per_mean must be > 0 and <= 100, got {self.interval_per_mean}"
            )
        if not 0 < self.memory <= 1:
            raise ValueError(f"memory must be > 0 and <= 1, got {self.memory}")
        if self.inc_rate <= 0:
            raise ValueError(f"inc_rate must be > 0, got {self.inc_rate}")
        if not 0 < self.dec_rate < 1:
            raise ValueError(f"dec_rate must be > 0 and < 1, got {self.dec_rate}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must be >= 0 and < 1, got {self.jitter}")

    @property
    def mode(self) -> str:
        return ADAPTIVE if self.adaptive else FIXED

    def clamp(self, seconds: float) -> float:
        return min(self.max_interval_s, max(self.min_interval_s, seconds))


def next_interval(
    configured_s: float, current_s: float | None, evidence: Evidence, policy: RecrawlPolicy
) -> float:
    """The interval after a crawl that found `evidence` under the `steps` method (see the
    module's rule); a fixed policy's is the configured one."""
    if not policy.adaptive:
        return configured_s
    interval = current_s if current_s and current_s > 0 else configured_s
    if evidence.saw_change:
        interval *= 1 - policy.dec_rate
    elif evidence.seen:
        interval *= 1 + policy.inc_rate
    return policy.clamp(interval)


def estimated_interval(belief: list[float], policy: RecrawlPolicy) -> float:
    """`interval_per_mean` times the belief's mean time between changes, within the bounds."""
    return policy.clamp(policy.interval_per_mean / change_rate.mean_rate(belief))


def same_direction(current_s: float, estimated_s: float, evidence: Evidence) -> float:
    """The estimate, but never longer after a change nor shorter after none: a belief
    tempered by `memory` drifts toward faster rates, and alone that could shorten the
    interval of a page that was just seen unchanged."""
    return min(current_s, estimated_s) if evidence.saw_change else max(current_s, estimated_s)


def belief_of(state: Mapping[str, Any], current_s: float, policy: RecrawlPolicy) -> list[float]:
    """The stored belief, or (none yet, an older document, a malformed one) a prior centred on
    what the current interval implies about the page."""
    stored = state.get("rate_belief")
    if change_rate.is_belief(stored):
        return [float(w) for w in stored]
    return change_rate.prior(current_s / policy.interval_per_mean)


def jittered(interval_s: float, policy: RecrawlPolicy, draw: float) -> float:
    """`interval_s` moved by up to ±`policy.jitter` of itself; `draw` in [0, 1) picks where.
    Clamped to the policy's bounds; a fixed policy is never jittered."""
    if not policy.adaptive or policy.jitter == 0:
        return interval_s
    spread = policy.jitter * (2 * min(max(draw, 0.0), 1.0) - 1)
    return policy.clamp(interval_s * (1 + spread))


def draw_for(job_id: Any, visit: int) -> float:
    """A draw in [0, 1) that depends only on the job and its visit number."""
    return random.Random(f"{job_id}:{visit}").random()


POLICY_FIELDS = tuple(f.name for f in dataclasses.fields(RecrawlPolicy))


@dataclass(frozen=True)
class Revisit:
    interval_s: float  # the job's interval from now on (what the next crawl starts from)
    delay_s: float  # until the next crawl: the interval, jittered
    state: dict[str, Any]  # the job's `recrawl` sub-document


def revisit(
    configured_s: float,
    state: Mapping[str, Any] | None,
    evidence: Evidence,
    policy: RecrawlPolicy,
    now: datetime,
    draw: Callable[[int], float],
) -> Revisit:
    """The next interval of a recurring job and its new `recrawl` state after a crawl.

    `state`: the job's `recrawl` sub-document so far (absent or malformed: a fresh start).
    `draw(visit)` gives the jitter draw of that visit (`draw_for` bound to the job id)."""
    state = state if isinstance(state, Mapping) else {}
    current = _number(state.get("interval_s")) or configured_s
    visits = int(_number(state.get("visits")) or 0) + 1
    changes = int(_number(state.get("changes")) or 0) + int(evidence.saw_change)
    # kept under every policy, so that a media turned adaptive starts from what was seen
    belief = belief_of(state, current, policy)
    # the first crawl has nothing to compare with: what it finds is new, but no change
    learns = evidence.seen and visits > 1
    if learns:
        elapsed = change_rate.seconds_since(state.get("updated_at"), now, current)
        belief = change_rate.updated(belief, elapsed, evidence.saw_change, policy.memory)
    if policy.adaptive and policy.method == ESTIMATE:
        interval = policy.clamp(current)
        if learns:
            interval = same_direction(interval, estimated_interval(belief, policy), evidence)
    else:
        interval = next_interval(configured_s, current, evidence, policy)
    delay = jittered(interval, policy, draw(visits))
    last = {"new": evidence.new, "changed": evidence.changed, "unchanged": evidence.unchanged}
    state = {
        "mode": policy.mode,
        "interval_s": interval,
        "visits": visits,
        "changes": changes,
        "last_items": last,
        "rate_belief": belief,
        "updated_at": now,
    }
    return Revisit(interval, delay, state)


def policy_of(row: Mapping[str, Any] | None, defaults: RecrawlPolicy) -> RecrawlPolicy:
    """A media's `recrawl` mapping (its reference row) over the defaults; ValueError when the
    result is no valid policy. Without `adaptive: true` the media keeps fixed intervals."""
    given = {k: v for k, v in (row or {}).items() if k in POLICY_FIELDS and v is not None}
    given["adaptive"] = given.get("adaptive") is True
    return dataclasses.replace(defaults, **given)


def after_crawl(
    update: JobUpdate, doc: Mapping[str, Any], policy: RecrawlPolicy, now: datetime
) -> JobUpdate:
    """A recurring job's success with its `recrawl` state, due again after the adapted (and
    jittered) interval; under a fixed policy its execution date is left as `after_success`
    set it. Any other update is returned as it is."""
    configured = _number(doc.get("interval_s"))
    if update.outcome != Outcome.SUCCEEDED or update.execution_date is None or not configured:
        return update
    found = revisit(
        configured, doc.get("recrawl"), Evidence.of(update.items), policy, now,
        lambda visit: draw_for(update.job_id, visit),
    )  # fmt: skip
    due = now + timedelta(seconds=found.delay_s) if policy.adaptive else update.execution_date
    return dataclasses.replace(update, execution_date=due, recrawl=found.state)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None
