"""KEDA's RabbitMQ scaler (`mode: QueueLength`) driving a Kubernetes HPA: a pure model.

No dramatiq, no pymongo, no clock: `now` is an argument. Used by bench_scaling.py; property
tested in tests/test_keda_model.py. What it models, with the sources checked:

KEDA (ScaledObject spec, keda.sh/docs/2.15/reference/scaledobject-spec and the rabbitmq-queue
scaler page):
- `pollingInterval` (default 30 s): KEDA reads the queue this often. The trigger is *active*
  when the metric is above `activationValue` (default 0).
- From zero: at a poll that finds the trigger active, KEDA scales the target to
  max(minReplicaCount, 1); from there the HPA it created takes over.
- `cooldownPeriod` (default 300 s) applies only to scaling *to zero* (only with
  `minReplicaCount: 0`): once the trigger has not been active for that long since it was last
  seen active, KEDA scales to 0. Scaling between 1 and N is the HPA's alone.
- `minReplicaCount` (default 0), `maxReplicaCount` (default 100). The HPA's own minimum is
  max(minReplicaCount, 1).
- The metric is an `AverageValue` external metric with target `value`: the HPA wants
  ceil(metric / value) replicas, whatever the current count ("20 messages, threshold 5: 4").
- With `protocol: amqp` the scaler reads the queue's *ready* messages (a passive declare);
  messages a consumer has prefetched and not acked are not counted. (The HTTP management API
  counts ready + unacked.) Which count is fed in is the caller's choice.

Kubernetes HPA (horizontal-pod-autoscale docs, "Algorithm details" and "Configurable scaling
behavior"; k8s API HPAScalingRules):
- It syncs every 15 s (`--horizontal-pod-autoscaler-sync-period`).
- Tolerance 0.1: if |metric / (value * current) - 1| <= 0.1 the recommendation is the current
  count (no change).
- Scale-down stabilization (default 300 s): the replicas are lowered only to the *highest*
  recommendation of the window; scale-up has no window by default.
- Scale-up policies (default): at most max(double, +4 pods) per 15 s period (selectPolicy
  Max). Scale-down policy (default): 100 % per 15 s, i.e. no limit beyond the window.

Not modelled: metric staleness beyond the polling cadence, `useCachedMetrics`, `fallback`,
`idleReplicaCount`, `initialCooldownPeriod`, custom `behavior` policies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

HPA_SYNC_S = 15.0
HPA_TOLERANCE = 0.1


@dataclass(frozen=True)
class KedaRule:
    """One ScaledObject with a rabbitmq trigger in QueueLength mode, and its HPA's behaviour."""

    value: float = 20.0  # target messages per replica
    activation_value: float = 0.0
    polling_interval_s: float = 30.0
    cooldown_period_s: float = 300.0
    min_replicas: int = 0
    max_replicas: int = 100
    hpa_sync_s: float = HPA_SYNC_S
    tolerance: float = HPA_TOLERANCE
    scale_down_window_s: float = 300.0
    scale_up_percent: float = 100.0
    scale_up_pods: int = 4
    scale_up_period_s: float = 15.0

    def __post_init__(self) -> None:
        positive = ("value", "polling_interval_s", "hpa_sync_s", "scale_up_period_s")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        non_negative = (
            "activation_value", "cooldown_period_s", "tolerance", "scale_down_window_s",
            "scale_up_percent", "scale_up_pods", "min_replicas",
        )  # fmt: skip
        for name in non_negative:
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.max_replicas < max(self.min_replicas, 1):
            raise ValueError(
                f"max_replicas must be >= max(min_replicas, 1), got {self.max_replicas}"
            )

    @property
    def hpa_min(self) -> int:
        return max(self.min_replicas, 1)


def desired_replicas(metric: float, current: int, rule: KedaRule) -> int:
    """The HPA's raw recommendation for an AverageValue metric, before stabilization and
    limits: the current count within the tolerance, else ceil(metric / value)."""
    if current <= 0:
        return 0  # the HPA does not act on a target at zero; KEDA activates it
    ratio = metric / (rule.value * current)
    if abs(ratio - 1.0) <= rule.tolerance:
        return current
    return math.ceil(metric / rule.value)


@dataclass(frozen=True)
class ScalerState:
    """What KEDA and the HPA remember between two steps."""

    replicas: int
    next_poll_s: float = 0.0
    next_sync_s: float = 0.0
    last_active_s: float | None = None
    # (time, raw recommendation) of the HPA syncs within the scale-down window.
    recommendations: tuple[tuple[float, int], ...] = ()
    # (time, replicas added) within the scale-up period, for the rate policy.
    added: tuple[tuple[float, int], ...] = ()


@dataclass(frozen=True)
class StepReport:
    """What happened at one step: for tests and traces."""

    polled: bool = False
    active: bool | None = None
    synced: bool = False
    recommendation: int | None = None
    reasons: tuple[str, ...] = field(default=())


def initial_state(rule: KedaRule, now: float = 0.0) -> ScalerState:
    """A new ScaledObject: KEDA sets the target to minReplicaCount at once."""
    return ScalerState(replicas=rule.min_replicas, next_poll_s=now, next_sync_s=now)


def _up_limit(state: ScalerState, now: float, rule: KedaRule) -> int:
    recent = sum(n for t, n in state.added if t > now - rule.scale_up_period_s)
    base = state.replicas - recent  # replicas at the start of the period
    by_percent = math.ceil(base * (1 + rule.scale_up_percent / 100))
    return max(by_percent, base + rule.scale_up_pods, state.replicas)


def _hpa_sync(state: ScalerState, now: float, metric: float, rule: KedaRule) -> ScalerState:
    recommendation = desired_replicas(metric, state.replicas, rule)
    kept = [(t, r) for t, r in state.recommendations if t > now - rule.scale_down_window_s]
    window = (*kept, (now, recommendation))
    highest = max(r for _, r in window)
    target = state.replicas
    if recommendation > target:  # scale up: no window (upscale stabilization 0)
        target = min(recommendation, _up_limit(state, now, rule))
    elif highest < target:  # scale down: only to the highest recommendation of the window
        target = highest
    target = min(max(target, rule.hpa_min), rule.max_replicas)
    added = tuple((t, n) for t, n in state.added if t > now - rule.scale_up_period_s)
    if target > state.replicas:
        added += ((now, target - state.replicas),)
    return replace(state, replicas=target, recommendations=window, added=added)


def step(
    state: ScalerState, now: float, metric: float, rule: KedaRule
) -> tuple[ScalerState, StepReport]:
    """Advance to `now` with the queue's current `metric`: a KEDA poll if one is due, then an
    HPA sync if one is due and the target is above zero. Call at least once per
    min(polling interval, HPA sync period) for the cadence to hold."""
    report = StepReport()
    if now >= state.next_poll_s:
        active = metric > rule.activation_value
        next_poll = state.next_poll_s + rule.polling_interval_s
        while next_poll <= now:
            next_poll += rule.polling_interval_s
        state = replace(state, next_poll_s=next_poll)
        report = replace(report, polled=True, active=active)
        if active:
            state = replace(state, last_active_s=now)
            if state.replicas == 0:
                start = rule.hpa_min
                state = replace(
                    state, replicas=start, added=((now, start),), next_sync_s=now + rule.hpa_sync_s
                )
                report = replace(report, reasons=("activated",))
        elif (
            state.replicas > 0
            and rule.min_replicas == 0
            and now - (state.last_active_s if state.last_active_s is not None else -math.inf)
            >= rule.cooldown_period_s
        ):
            state = replace(state, replicas=0, recommendations=(), added=())
            report = replace(report, reasons=("cooled_down",))
    if state.replicas > 0 and now >= state.next_sync_s:
        recommendation = desired_replicas(metric, state.replicas, rule)
        state = _hpa_sync(state, now, metric, rule)
        next_sync = state.next_sync_s + rule.hpa_sync_s
        while next_sync <= now:
            next_sync += rule.hpa_sync_s
        state = replace(state, next_sync_s=next_sync)
        report = replace(report, synced=True, recommendation=recommendation)
    return state, report
