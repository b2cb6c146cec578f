"""The states a crawl batch goes through, and the states of the loop over its pages (pure).

A batch message arrives at a crawl actor; what the worker does with it is a walk through
`BatchState` (`crawl/batch.py`). While it crawls, the loop over its pages is a walk through
`LoopState` (`crawl/loop.py`). Each walk is one transition function: a state and an event in,
the next state out; an event a state does not take is a bug (`BadTransition`).

How a crash is recovered depends only on the state the batch was in, as the store saw it:

- RECEIVED / LOADED: the message was not acked; RabbitMQ redelivers it. Its jobs are still
  claimed by its dispatch id, so the redelivery loads them again. A worker that never comes
  back leaves them to the dispatch lease (`reclaim_expired` gives them back to their run).
- CRAWLING: pages fetched since the last part was recorded are fetched again by the
  redelivery (counted once: an outcome is written once per dispatch). Parts recorded are
  kept; the rest of the batch is under the last part's id, which the redelivery works out
  (`crawl/parts.part_dispatch_id`) and puts back to wait at once (`recover_parts`). A crash
  in a hand-over (the loop's HANDING_OVER or PART_INLINE, below) is recovered the same way:
  each of its writes is conditional on the dispatch id, and they come in an order that leaves
  the store whole after any prefix (the part recorded, the rest moved, kept pages claimed, the
  report applied); the redelivery resends the report of every part whose jobs ended after it
  has moved the rest back.
- RECORDED: the batch's last part is recorded; only the report may be missing. The
  redelivery finds no job held, reads the outcomes back and sends the report again; the
  coordinator drops a report it applied before.
- PARKED / HELD / STOPPED: the rest was moved to a waiting batch, given back to its paused
  run, or released as stopped, each in one write; a redelivery finds nothing held and only
  reports again.
- REPORTED: done; a duplicate delivery reports again and is dropped by the coordinator.

```mermaid
stateDiagram-v2
    [*] --> RECEIVED
    RECEIVED --> LOADED: loaded (its jobs, begun)
    RECEIVED --> RECOVERED: nothing held (redelivered: parts' rest put back, reports resent)
    LOADED --> STOPPED: run stopped
    LOADED --> HELD: run paused
    LOADED --> CRAWLING: crawl
    CRAWLING --> RECORDED: last part recorded
    RECORDED --> PARKED: rest waits for hosts or resources
    RECORDED --> STOPPED: rest released as stopped
    RECORDED --> REPORTED: report sent
    PARKED --> REPORTED: report sent
    STOPPED --> REPORTED: report sent
    HELD --> REPORTED: (nothing to report)
    RECOVERED --> REPORTED: reports resent
    REPORTED --> [*]
```

The loop over the pages (`LoopState`): pages start only while CRAWLING or HANDING_OVER, and
pages of other batches join only while CRAWLING (a part's message changes while it is
recorded: pages taken then would be left under the old dispatch id). The loop waits for the
lanes (and a part being recorded) before it records inline or ends; `LANES_IDLE` means nothing
is in flight and nothing is left to start.

```mermaid
stateDiagram-v2
    [*] --> CRAWLING
    CRAWLING --> HANDING_OVER: part due, the batch keeps pages (recorded beside the crawl)
    HANDING_OVER --> CRAWLING: part recorded
    CRAWLING --> PART_INLINE: part due (recorded in the loop's thread, nothing in flight)
    PART_INLINE --> CRAWLING: part recorded
    CRAWLING --> DRAINING: stop seen / resource lost
    HANDING_OVER --> DRAINING: stop seen / resource lost
    PART_INLINE --> DRAINING: stop seen / resource lost
    DRAINING --> DRAINING: part recorded / stop seen / resource lost
    CRAWLING --> ENDED: lanes idle
    DRAINING --> ENDED: lanes idle
    ENDED --> [*]
```
"""

from __future__ import annotations

from enum import Enum


class BadTransition(ValueError):
    """An event the state does not take: a bug in the caller, not a fault to recover from."""


class BatchState(Enum):
    RECEIVED = "received"  # the message, parsed; nothing read yet
    LOADED = "loaded"  # its jobs read and begun (none can be taken over any more)
    RECOVERED = "recovered"  # redelivered and holding nothing: its parts' rest put back
    CRAWLING = "crawling"  # the loop over its pages runs
    RECORDED = "recorded"  # the last part's outcomes are written
    PARKED = "parked"  # the rest waits for hosts or resources under a new dispatch id
    HELD = "held"  # paused before it began: its jobs wait in their run
    STOPPED = "stopped"  # released as stopped (counted ended)
    REPORTED = "reported"  # the report is sent (or there was nothing to report)


class BatchEvent(Enum):
    LOADED = "loaded"
    NOTHING_HELD = "nothing_held"
    RUN_STOPPED = "run_stopped"
    RUN_PAUSED = "run_paused"
    CRAWL = "crawl"
    LAST_PART_RECORDED = "last_part_recorded"
    REST_PARKED = "rest_parked"
    REST_STOPPED = "rest_stopped"
    REPORTED = "reported"


_BATCH: dict[tuple[BatchState, BatchEvent], BatchState] = {
    (BatchState.RECEIVED, BatchEvent.LOADED): BatchState.LOADED,
    (BatchState.RECEIVED, BatchEvent.NOTHING_HELD): BatchState.RECOVERED,
    (BatchState.LOADED, BatchEvent.RUN_STOPPED): BatchState.STOPPED,
    (BatchState.LOADED, BatchEvent.RUN_PAUSED): BatchState.HELD,
    (BatchState.LOADED, BatchEvent.CRAWL): BatchState.CRAWLING,
    (BatchState.CRAWLING, BatchEvent.LAST_PART_RECORDED): BatchState.RECORDED,
    (BatchState.RECORDED, BatchEvent.REST_PARKED): BatchState.PARKED,
    (BatchState.RECORDED, BatchEvent.REST_STOPPED): BatchState.STOPPED,
    (BatchState.RECORDED, BatchEvent.REPORTED): BatchState.REPORTED,
    (BatchState.PARKED, BatchEvent.REPORTED): BatchState.REPORTED,
    (BatchState.STOPPED, BatchEvent.REPORTED): BatchState.REPORTED,
    (BatchState.HELD, BatchEvent.REPORTED): BatchState.REPORTED,
    (BatchState.RECOVERED, BatchEvent.REPORTED): BatchState.REPORTED,
}


def next_batch_state(state: BatchState, event: BatchEvent) -> BatchState:
    try:
        return _BATCH[(state, event)]
    except KeyError:
        raise BadTransition(f"a batch {state.value} does not take {event.value}") from None


class LoopState(Enum):
    CRAWLING = "crawling"  # pages start as lanes free up and their hosts allow
    HANDING_OVER = "handing_over"  # a part is recorded beside the crawl; nothing taken over
    PART_INLINE = "part_inline"  # a part is due: the lanes finish, then it is recorded here
    DRAINING = "draining"  # stopped or interrupted: the lanes finish what is in flight
    ENDED = "ended"


class LoopEvent(Enum):
    PART_DUE_BESIDE = "part_due_beside"  # a part is due; the batch keeps pages
    PART_DUE_INLINE = "part_due_inline"  # a part is due; recorded with no page in flight
    PART_RECORDED = "part_recorded"
    STOP_SEEN = "stop_seen"
    RESOURCE_LOST = "resource_lost"
    LANES_IDLE = "lanes_idle"  # nothing in flight, nothing left to start


_LOOP: dict[tuple[LoopState, LoopEvent], LoopState] = {
    (LoopState.CRAWLING, LoopEvent.PART_DUE_BESIDE): LoopState.HANDING_OVER,
    (LoopState.CRAWLING, LoopEvent.PART_DUE_INLINE): LoopState.PART_INLINE,
    (LoopState.HANDING_OVER, LoopEvent.PART_RECORDED): LoopState.CRAWLING,
    (LoopState.PART_INLINE, LoopEvent.PART_RECORDED): LoopState.CRAWLING,
    (LoopState.DRAINING, LoopEvent.PART_RECORDED): LoopState.DRAINING,
    (LoopState.CRAWLING, LoopEvent.LANES_IDLE): LoopState.ENDED,
    (LoopState.DRAINING, LoopEvent.LANES_IDLE): LoopState.ENDED,
}
for _state in (LoopState.CRAWLING, LoopState.HANDING_OVER, LoopState.PART_INLINE):
    for _event in (LoopEvent.STOP_SEEN, LoopEvent.RESOURCE_LOST):
        _LOOP[(_state, _event)] = LoopState.DRAINING
for _event in (LoopEvent.STOP_SEEN, LoopEvent.RESOURCE_LOST):
    _LOOP[(LoopState.DRAINING, _event)] = LoopState.DRAINING


def next_loop_state(state: LoopState, event: LoopEvent) -> LoopState:
    try:
        return _LOOP[(state, event)]
    except KeyError:
        raise BadTransition(f"a crawl loop {state.value} does not take {event.value}") from None


def starts_pages(state: LoopState) -> bool:
    """Whether pages may start in this state."""
    return state in (LoopState.CRAWLING, LoopState.HANDING_OVER)


def takes_over(state: LoopState) -> bool:
    """Whether pages of other batches may join this one: never while a part is recorded (the
    part's message changes under it: pages taken then would be left under the old id)."""
    return state is LoopState.CRAWLING
