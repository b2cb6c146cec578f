"""What one worker process knows of one host's lease, as named states (pure).

A process sends to a host only while it holds a slice of the host's lease (`host_rules`); the
slice is asked for, renewed and given back through the store, one thread of the process at a
time, while the process's other threads wait for the answer or go on sending within the slice.

```mermaid
stateDiagram-v2
    [*] --> FREE
    FREE --> ASKING: ask
    REFUSED --> ASKING: ask (the refusal's moment passed, or the holder gave it back)
    ASKING --> HELD: granted
    ASKING --> REFUSED: refused (held by another process, blocked, budget used)
    HELD --> HELD: renewed
    HELD --> RELEASING: give back (slice ends, a 429, budget used, no job needs it)
    RELEASING --> FREE: released
    ASKING --> FREE: call failed (the asking thread's store call raised)
    RELEASING --> FREE: call failed (the slice runs out in the store)
```

A crash of the whole process in any state leaves the store as its last write did: a slice
granted runs out at its end (`lease_until`), a release not written leaves the slice to run
out, and nobody else waits longer than that slice.
"""

from __future__ import annotations

from enum import Enum


class SliceState(Enum):
    FREE = "free"  # neither held nor refused here: the next request asks the store
    ASKING = "asking"  # one thread asks the store for a slice; the others wait for its answer
    HELD = "held"  # a slice until `lease_until`: starts are paced here, with no store trip
    REFUSED = "refused"  # refused until a moment (held elsewhere, blocked, budget used)
    RELEASING = "releasing"  # one thread gives the slice back; the others wait


class SliceEvent(Enum):
    ASK = "ask"
    GRANTED = "granted"
    REFUSED = "refused"
    RENEWED = "renewed"
    GIVE_BACK = "give_back"
    RELEASED = "released"
    CALL_FAILED = "call_failed"  # the store call raised: nothing is known to have changed


_NEXT: dict[tuple[SliceState, SliceEvent], SliceState] = {
    (SliceState.FREE, SliceEvent.ASK): SliceState.ASKING,
    (SliceState.REFUSED, SliceEvent.ASK): SliceState.ASKING,
    (SliceState.ASKING, SliceEvent.GRANTED): SliceState.HELD,
    (SliceState.ASKING, SliceEvent.REFUSED): SliceState.REFUSED,
    (SliceState.ASKING, SliceEvent.CALL_FAILED): SliceState.FREE,
    (SliceState.HELD, SliceEvent.RENEWED): SliceState.HELD,
    (SliceState.HELD, SliceEvent.GIVE_BACK): SliceState.RELEASING,
    (SliceState.RELEASING, SliceEvent.RELEASED): SliceState.FREE,
    # A release whose call failed: the slice is no longer used here and runs out in the store.
    (SliceState.RELEASING, SliceEvent.CALL_FAILED): SliceState.FREE,
}


class BadSliceEvent(ValueError):
    """An event a state does not take: a bug in the caller."""


def next_slice_state(state: SliceState, event: SliceEvent) -> SliceState:
    """The state after `event`; `BadSliceEvent` for an event the state does not take."""
    try:
        return _NEXT[(state, event)]
    except KeyError:
        raise BadSliceEvent(f"a host slice {state.value} does not take {event.value}") from None


def busy(state: SliceState) -> bool:
    """Another thread is in the store for this host: wait for its answer."""
    return state in (SliceState.ASKING, SliceState.RELEASING)
