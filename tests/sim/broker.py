"""Message queues as RabbitMQ and dramatiq deliver them, on the world's clock.

- at least once: a delivery is, with `duplicate_p`, also left in its queue (a publisher's resend
  or a lost ack: same message id);
- out of order: a worker takes a random ready message of its queues, not the oldest;
- delays honoured on the virtual clock;
- a crashed process's unacked deliveries go back to their queues, `redelivered=True` (RabbitMQ
  requeues them when the connection drops);
- `fail` follows dramatiq's Retries middleware: `throws=` exceptions dead-lettered at once,
  `max_retries`, exponential backoff with jitter between `min_backoff` and `max_backoff` (ms),
  a `dramatiq.Retry(delay=)` honoured; the retry is a new message with the same id and
  `retries` one more.

Sending, acking and failing are crash points ("send", "ack"): with those in the world's
`CrashPolicy.points`, a process may die instead of sending or acking.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import dramatiq
from dramatiq.broker import MessageProxy
from dramatiq.middleware import CurrentMessage
from dramatiq.middleware.retries import DEFAULT_MAX_BACKOFF

from tests.sim.kernel import TIMED_OUT, SimCrash, SimError, SimProcess, SimThread
from tests.sim.world import World


@dataclass(frozen=True)
class Message:
    message_id: str
    queue: str
    actor_name: str
    args: tuple
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    retries: int = 0
    redelivered: bool = False
    sent_s: float = 0.0  # virtual time of the first send (a retry keeps it, as dramatiq does)


@dataclass(frozen=True)
class Delivery:
    tag: int
    message: Message
    process: SimProcess
    generation: int


@dataclass(frozen=True)
class RetryPolicy:
    """An actor's retry options, as dramatiq's Retries reads them (crawlsched's broker
    defaults: 5 retries, 0.5 s to 30 s). `max_age_ms`: dramatiq's AgeLimit (skip older)."""

    max_retries: int = 5
    min_backoff_ms: int = 500
    max_backoff_ms: int = 30_000
    throws: tuple[type[BaseException], ...] = ()
    max_age_ms: int | None = None

    @classmethod
    def of_actor(cls, actor: dramatiq.Actor, default: RetryPolicy | None = None) -> RetryPolicy:
        base = default or cls()
        options = actor.options
        throws = options.get("throws") or ()
        return cls(
            max_retries=options.get("max_retries", base.max_retries),
            min_backoff_ms=options.get("min_backoff", base.min_backoff_ms),
            max_backoff_ms=options.get("max_backoff", base.max_backoff_ms),
            throws=throws if isinstance(throws, tuple) else (throws,),
            max_age_ms=options.get("max_age", base.max_age_ms),
        )


NO_RETRY = RetryPolicy(max_retries=0)


class SimBroker:
    def __init__(self, world: World, duplicate_p: float = 0.0) -> None:
        if not 0.0 <= duplicate_p <= 1.0:
            raise ValueError(f"duplicate_p must be within [0, 1], got {duplicate_p}")
        self.world, self.duplicate_p = world, duplicate_p
        self._rng = world.rng("broker")
        self._ids = itertools.count(1)
        self._tags = itertools.count(1)
        self._ready: dict[str, list[Message]] = defaultdict(list)
        self._takers: dict[str, list[SimThread]] = defaultdict(list)
        self._unacked: dict[int, Delivery] = {}
        self._delayed = 0
        self.stats: dict[str, Counter] = defaultdict(Counter)  # per actor
        self.dead_letters: list[tuple[Message, str]] = []
        self._handling: dict[int, Delivery] = {}  # by thread: what its handler runs
        world.on_crash(self._requeue_of)

    # -- sending -------------------------------------------------------------------------------

    def send(
        self,
        queue: str,
        actor_name: str,
        args: Sequence[Any] = (),
        delay_s: float = 0.0,
        redelivered: bool = False,
        *,
        kwargs: Mapping[str, Any] | None = None,
    ) -> Message:
        """Enqueue a message (ready after `delay_s` virtual seconds). A crash point "send"."""
        self.world.fault_point(f"send:{actor_name}", "send")
        message = Message(
            f"m{next(self._ids)}", queue, actor_name, tuple(args), dict(kwargs or {}),
            redelivered=redelivered, sent_s=self.world.elapsed,
        )  # fmt: skip
        self.stats[actor_name]["sent"] += 1
        self._enqueue(message, delay_s)
        return message

    def _enqueue(self, message: Message, delay_s: float) -> None:
        if delay_s > 0:
            self._delayed += 1
            self.world.call_later(delay_s, lambda: self._ready_now(message, delayed=True))
        else:
            self._ready_now(message)

    def _ready_now(self, message: Message, delayed: bool = False) -> None:
        self._delayed -= delayed
        self._ready[message.queue].append(message)
        takers, self._takers[message.queue] = self._takers[message.queue], []
        for taker in takers:  # each looks again (one of them may have crashed)
            self.world.wake(taker)

    # -- taking --------------------------------------------------------------------------------

    def take(
        self, process: SimProcess, queues: Sequence[str], timeout: float | None = None
    ) -> Delivery | None:
        """A random ready message of `queues` (waiting for one; None after `timeout`)."""
        world = self.world
        cur = world._running("take")
        if cur.process is not process:
            raise SimError(f"{cur.name} takes for {process.name}")
        world.step("take")
        deadline = None if timeout is None else world.elapsed + timeout
        while True:
            message = self._pop_ready(queues)
            if message is not None:
                return self._deliver(process, message)
            left = None if deadline is None else deadline - world.elapsed
            if left is not None and left <= 0:
                return None
            for q in queues:
                self._takers[q].append(cur)
            try:
                if world.block(f"a message on {', '.join(queues)}", left, "take") is TIMED_OUT:
                    return None
            finally:
                for q in queues:
                    if cur in self._takers[q]:
                        self._takers[q].remove(cur)

    def _pop_ready(self, queues: Sequence[str]) -> Message | None:
        total = sum(len(self._ready[q]) for q in queues)
        if not total:
            return None
        pick = self._rng.randrange(total)
        for q in queues:
            ready = self._ready[q]
            if pick < len(ready):
                ready[pick], ready[-1] = ready[-1], ready[pick]
                return ready.pop()
            pick -= len(ready)
        raise AssertionError("unreachable")

    def _deliver(self, process: SimProcess, message: Message) -> Delivery:
        stats = self.stats[message.actor_name]
        stats["delivered"] += 1
        if self._rng.random() < self.duplicate_p:
            stats["duplicated"] += 1
            self._ready_now(replace(message, redelivered=False))
        delivery = Delivery(next(self._tags), message, process, process.generation)
        self._unacked[delivery.tag] = delivery
        return delivery

    # -- settling ------------------------------------------------------------------------------

    def ack(self, delivery: Delivery) -> None:
        """Done with the message. A crash point "ack" (the message is then redelivered)."""
        self.world.fault_point(f"ack:{delivery.message.actor_name}", "ack")
        self._settle(delivery)
        self.stats[delivery.message.actor_name]["acked"] += 1

    def fail(self, delivery: Delivery, exc: BaseException, policy: RetryPolicy) -> str:
        """The actor raised `exc`: retry later or dead-letter, as dramatiq's Retries decides.
        Returns "retried" or "dead_lettered". A crash point "ack"."""
        message = delivery.message
        self.world.fault_point(f"fail:{message.actor_name}", "ack")
        self._settle(delivery)
        stats = self.stats[message.actor_name]
        if policy.throws and isinstance(exc, policy.throws):
            return self._dead_letter(message, f"throws {type(exc).__name__}")
        if message.retries >= policy.max_retries:
            return self._dead_letter(message, f"retries exceeded ({message.retries})")
        if isinstance(exc, dramatiq.Retry) and exc.delay is not None:
            delay_ms = exc.delay
        else:
            delay_ms = self._backoff_ms(message.retries, policy)
        stats["retried"] += 1
        retry = replace(message, retries=message.retries + 1, redelivered=False)
        self._enqueue(retry, delay_ms / 1000)
        return "retried"

    def _backoff_ms(self, retries: int, policy: RetryPolicy) -> int:
        # dramatiq.common.compute_backoff, jitter drawn from the broker's seeded stream.
        max_backoff = min(policy.max_backoff_ms, DEFAULT_MAX_BACKOFF)
        backoff = int(policy.min_backoff_ms * 2 ** min(retries, 32) * self._rng.uniform(1, 2))
        if backoff > max_backoff:
            backoff = int(max_backoff * self._rng.uniform(0.5, 1))
        return backoff

    def _dead_letter(self, message: Message, reason: str) -> str:
        self.stats[message.actor_name]["dead_lettered"] += 1
        self.dead_letters.append((message, reason))
        return "dead_lettered"

    def _settle(self, delivery: Delivery) -> None:
        if self._unacked.pop(delivery.tag, None) is None:
            raise SimError(f"delivery {delivery.tag} settled twice or after its redelivery")

    def _requeue_of(self, process: SimProcess) -> None:
        for tag, delivery in list(self._unacked.items()):
            if delivery.process is process:
                del self._unacked[tag]
                message = delivery.message
                self.stats[message.actor_name]["redelivered"] += 1
                self._ready_now(replace(message, redelivered=True))

    # -- reading -------------------------------------------------------------------------------

    def idle(self) -> bool:
        """No message ready, delayed or delivered and not yet settled."""
        return not self._unacked and not self._delayed and not any(self._ready.values())

    def ready(self, queue: str) -> list[Message]:
        return list(self._ready[queue])

    def totals(self) -> Counter:
        total: Counter = Counter()
        for counts in self.stats.values():
            total.update(counts)
        return total

    # -- a worker ------------------------------------------------------------------------------

    def worker(
        self,
        process: SimProcess,
        queues: Sequence[str],
        handlers: Mapping[str, Callable[..., Any]],
        policies: Mapping[str, RetryPolicy] | None = None,
        default: RetryPolicy = NO_RETRY,
        running: Callable[[], bool] | None = None,
    ) -> Callable[[], None]:
        """A dramatiq worker thread's loop over `queues` (spawn it as a daemon): take, skip if
        older than its `max_age_ms`, call the actor's handler, then ack, or fail with its
        policy. SimCrash goes through (the delivery is redelivered). `running`: while it says
        so (dramatiq's WorkerThread.stop: it finishes the message it holds, and one it was
        handed while it waited); the loop returns then."""
        policies = policies or {}
        # Without `running`, take waits as long as it must (no timer: seeds replay as before).
        timeout = None if running is None else 1.0

        def loop() -> None:
            while running is None or running():
                delivery = self.take(process, queues, timeout)
                if delivery is None:
                    continue
                message = delivery.message
                policy = policies.get(message.actor_name, default)
                age_ms = (self.world.elapsed - message.sent_s) * 1000
                if policy.max_age_ms is not None and age_ms > policy.max_age_ms:
                    self.stats[message.actor_name]["expired"] += 1
                    self.ack(delivery)
                    continue
                try:
                    self._handle(delivery, handlers[message.actor_name])
                except SimCrash:
                    raise
                except Exception as e:
                    self.fail(delivery, e, policy)
                else:
                    self.ack(delivery)

        return loop

    def _handle(self, delivery: Delivery, handler: Callable[..., Any]) -> None:
        """Call the handler as dramatiq's worker does, its message the CurrentMessage."""
        message, seq = delivery.message, self.world._running("handle").seq
        token = CurrentMessage._MESSAGE.set(self.dramatiq_message(message))
        self._handling[seq] = delivery
        try:
            handler(*message.args, **message.kwargs)
        finally:
            del self._handling[seq]
            CurrentMessage._MESSAGE.reset(token)

    def current(self) -> Delivery | None:
        """The delivery the running thread's handler was called for."""
        cur = self.world.current()
        return self._handling.get(cur.seq) if cur is not None else None

    def dramatiq_message(self, message: Message) -> MessageProxy:
        """`message` as dramatiq's CurrentMessage gives it to an actor: `options["retries"]`
        once retried, `redelivered` as RabbitMQ's flag, timestamps on the virtual clock."""
        options = {"retries": message.retries} if message.retries else {}
        sent_at = self.world.start.timestamp() + message.sent_s
        proxy = MessageProxy(
            dramatiq.Message(
                message.queue, message.actor_name, message.args, dict(message.kwargs), options,
                message_id=message.message_id, message_timestamp=int(sent_at * 1000),
            )
        )  # fmt: skip
        proxy.redelivered = message.redelivered  # type: ignore[attr-defined]
        return proxy
