"""The named state machines of the crawl core, property-tested: a batch's walk and its loop's
(`planning/batch_states.py`), a process's slice of a host (`resources/host_slices.py`).

Each transition function is probed over every (state, event) pair, and the table that gives
is checked against the Mermaid diagram in its module's docstring: the diagram names exactly
the transitions (from → to) the function takes, its start is the start, and its ends are the
states that take no event."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.planning import batch_states
from crawlsched.planning.batch_states import (
    BadTransition,
    BatchEvent,
    BatchState,
    LoopEvent,
    LoopState,
    next_batch_state,
    next_loop_state,
    starts_pages,
    takes_over,
)
from crawlsched.resources import host_slices
from crawlsched.resources.host_slices import (
    BadSliceEvent,
    SliceEvent,
    SliceState,
    next_slice_state,
)


@dataclass(frozen=True)
class Machine:
    name: str
    states: type[Enum]
    events: type[Enum]
    step: Callable
    refusal: type[Exception]
    doc: str  # the module's docstring
    diagram: int  # which Mermaid block of it draws this machine

    def table(self) -> dict[tuple[Enum, Enum], Enum]:
        """What `step` does, probed over every (state, event) pair; refused pairs left out."""
        taken = {}
        for state in self.states:
            for event in self.events:
                with contextlib.suppress(self.refusal):
                    taken[(state, event)] = self.step(state, event)
        return taken

    def drawn(self) -> tuple[set[str], set[tuple[str, str]], set[str]]:
        """The diagram's start states, its transitions (from, to), and its end states, by name."""
        block = MERMAID.findall(self.doc)[self.diagram]
        starts, edges, ends = set(), set(), set()
        for source, target in EDGE.findall(block):
            if source == "[*]":
                starts.add(target)
            elif target == "[*]":
                ends.add(source)
            else:
                edges.add((source, target))
        return starts, edges, ends


MERMAID = re.compile(r"```mermaid\n(.*?)```", re.S)
EDGE = re.compile(r"^\s*(\[\*\]|\w+)\s*-->\s*(\[\*\]|\w+)", re.M)

BATCH = Machine(
    "batch",
    BatchState,
    BatchEvent,
    next_batch_state,
    BadTransition,
    batch_states.__doc__,
    0,
)
LOOP = Machine(
    "loop", LoopState, LoopEvent, next_loop_state, BadTransition, batch_states.__doc__, 1
)
SLICE = Machine(
    "slice", SliceState, SliceEvent, next_slice_state, BadSliceEvent, host_slices.__doc__, 0
)
MACHINES = [BATCH, LOOP, SLICE]
START = {"batch": BatchState.RECEIVED, "loop": LoopState.CRAWLING, "slice": SliceState.FREE}


def reachable(machine: Machine, start: Enum) -> set[Enum]:
    table = machine.table()
    seen, todo = {start}, [start]
    while todo:
        state = todo.pop()
        for (source, _event), target in table.items():
            if source is state and target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def terminal(machine: Machine) -> set[Enum]:
    taken = {source for source, _event in machine.table()}
    return {state for state in machine.states if state not in taken}


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_every_state_is_reachable_from_the_start(machine):
    assert reachable(machine, START[machine.name]) == set(machine.states)


@pytest.mark.parametrize("machine", [BATCH, LOOP], ids=lambda m: m.name)
def test_every_state_can_still_reach_the_end(machine):
    # A batch or a loop never gets stuck: from wherever it is, its end is still ahead
    (end,) = terminal(machine)
    assert {s for s in machine.states if end not in reachable(machine, s)} == set()


def test_the_ends_take_no_event_and_a_slice_has_none():
    assert terminal(BATCH) == {BatchState.REPORTED}
    assert terminal(LOOP) == {LoopState.ENDED}
    assert terminal(SLICE) == set()  # a process may always ask for a host again
    for machine, end in ((BATCH, BatchState.REPORTED), (LOOP, LoopState.ENDED)):
        for event in machine.events:
            with pytest.raises(machine.refusal):
                machine.step(end, event)


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_the_diagram_names_exactly_the_transitions_the_table_has(machine):
    starts, edges, ends = machine.drawn()
    taken = {(source.name, target.name) for (source, _e), target in machine.table().items()}
    assert edges == taken
    assert starts == {START[machine.name].name}
    assert ends == {state.name for state in terminal(machine)}
    # and every state it draws is one of the enum's, and every one of the enum's is drawn
    assert {name for edge in edges for name in edge} | starts == {s.name for s in machine.states}


@pytest.mark.parametrize(
    ("machine", "state", "event"),
    [
        (BATCH, BatchState.RECEIVED, BatchEvent.REPORTED),  # nothing read, nothing to report
        (BATCH, BatchState.LOADED, BatchEvent.LAST_PART_RECORDED),  # not crawling yet
        (BATCH, BatchState.CRAWLING, BatchEvent.CRAWL),
        (BATCH, BatchState.HELD, BatchEvent.CRAWL),  # a paused batch does not crawl
        (LOOP, LoopState.HANDING_OVER, LoopEvent.PART_DUE_INLINE),  # one part at a time
        (LOOP, LoopState.PART_INLINE, LoopEvent.LANES_IDLE),  # its part first
        (LOOP, LoopState.DRAINING, LoopEvent.PART_DUE_BESIDE),
        (SLICE, SliceState.FREE, SliceEvent.GIVE_BACK),  # nothing held to give back
        (SLICE, SliceState.ASKING, SliceEvent.ASK),  # one thread asks at a time
        (SLICE, SliceState.REFUSED, SliceEvent.RENEWED),
        (SLICE, SliceState.HELD, SliceEvent.GRANTED),
    ],
)
def test_an_event_the_state_does_not_take_is_refused_with_both_named(machine, state, event):
    with pytest.raises(machine.refusal) as refused:
        machine.step(state, event)
    assert isinstance(refused.value, ValueError)
    assert state.value in str(refused.value) and event.value in str(refused.value)


def _walk(machine: Machine, events: list[Enum]) -> tuple[list[Enum], set[tuple[str, str]]]:
    """The states a walk from the start goes through (a refused event leaves the state), and
    the transitions it took (from, to)."""
    state = START[machine.name]
    walked, moves = [state], set()
    for event in events:
        try:
            after = machine.step(state, event)
        except machine.refusal:
            after = state
        else:
            moves.add((state.name, after.name))
        assert isinstance(after, machine.states)  # never anything else, never None
        state = after
        walked.append(state)
    return walked, moves


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
@given(data=st.data())
def test_random_events_only_ever_move_along_the_diagram(machine, data):
    events = data.draw(st.lists(st.sampled_from(list(machine.events)), max_size=60))
    _starts, edges, _ends = machine.drawn()
    walked, moves = _walk(machine, events)
    assert moves <= edges
    ends = terminal(machine)
    for at, state in enumerate(walked):
        if state in ends:  # once ended, always ended
            assert set(walked[at:]) == {state}
            break


@given(events=st.lists(st.sampled_from(list(LoopEvent)), max_size=60))
def test_a_loop_takes_over_pages_only_while_it_starts_them(events):
    # Pages of other batches join only where pages start, and never while a part is recorded
    for state in _walk(LOOP, events)[0]:
        assert not takes_over(state) or starts_pages(state)
        assert not takes_over(state) or state not in (LoopState.HANDING_OVER, LoopState.PART_INLINE)
