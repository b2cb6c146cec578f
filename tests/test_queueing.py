"""The order in which waiting batches are admitted (pure rules, no store)."""

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from crawlsched.resources.queueing import (
    Load,
    WaitingBatch,
    account_key,
    admission_key,
    describe_keys,
    next_to_admit,
    pool_keys,
)
from tests.support.factories import NOW

MEDIA = ["twitter", "instagram", "tiktok"]


@st.composite
def waiting_batches(draw):
    batches = []
    for i in range(draw(st.integers(1, 12))):
        media = draw(st.sampled_from(MEDIA))
        login, selenium = draw(st.booleans()), draw(st.booleans())
        needs = pool_keys(login, selenium, media) or frozenset({account_key(media)})
        batches.append(
            WaitingBatch(
                dispatch_id=f"d{i}",
                run_id=draw(st.sampled_from(["r1", "r2", "r3"])),
                media_name=media,
                needs=needs,
                enqueued_at=NOW + timedelta(seconds=draw(st.integers(0, 60))),
                wait_until=NOW + timedelta(hours=1),
                human_validation=draw(st.sampled_from([0, 1])),
                certitude=draw(st.sampled_from([0.5, 0.7, 0.9])),
                oldest_modified_at=draw(
                    st.none() | st.integers(0, 100).map(lambda m: NOW - timedelta(minutes=m))
                ),
            )
        )
    return batches


loads = st.builds(
    Load,
    by_run=st.dictionaries(st.sampled_from(["r1", "r2", "r3"]), st.integers(0, 5)),
    by_media=st.dictionaries(st.sampled_from(MEDIA), st.integers(0, 5)),
)


@given(waiting_batches(), loads)
def test_next_to_admit_is_the_highest_priority_class(batches, load):
    chosen = next_to_admit(batches, load)
    best = max((b.human_validation, b.certitude) for b in batches)
    assert (chosen.human_validation, chosen.certitude) == best


@given(waiting_batches(), loads, st.sets(st.sampled_from(["selenium", *map(account_key, MEDIA)])))
def test_batches_needing_a_short_pool_are_passed_over(batches, load, short):
    chosen = next_to_admit(batches, load, short)
    eligible = [b for b in batches if not (b.needs & short)]
    if not eligible:
        assert chosen is None
    else:
        assert chosen in eligible
        assert admission_key(chosen, load) == min(admission_key(b, load) for b in eligible)


@given(waiting_batches())
def test_within_a_priority_class_the_least_served_run_goes_first(batches):
    # Given every batch in the same class, and run r1 already holding many leases
    same = [
        WaitingBatch(**{**b.__dict__, "human_validation": 0, "certitude": 0.5}) for b in batches
    ]
    load = Load({"r1": 10}, {})
    chosen = next_to_admit(same, load)
    if any(b.run_id != "r1" for b in same):
        assert chosen.run_id != "r1"


def test_one_big_run_does_not_hold_the_pool():
    # A run of 10 batches enqueued first, and a run of 1 enqueued last, same priority class.
    big = [
        WaitingBatch(f"big{i}", "big", "twitter", frozenset({"selenium"}), NOW, NOW)
        for i in range(10)
    ]
    small = WaitingBatch(
        "small", "small", "tiktok", frozenset({"selenium"}), NOW + timedelta(1), NOW
    )
    waiting, load, order = [*big, small], Load({}, {}), []
    while (batch := next_to_admit(waiting, load)) is not None:
        waiting.remove(batch)
        order.append(batch.dispatch_id)
        load = load.plus(batch, 1)
    # The small run goes second: as soon as the big one holds more than it does.
    assert order.index("small") == 1


def test_priority_beats_fairness_and_first_come():
    low = WaitingBatch("low", "r1", "twitter", frozenset({"selenium"}), NOW, NOW, 0, 0.5)
    high = WaitingBatch(
        "high", "r2", "twitter", frozenset({"selenium"}), NOW + timedelta(1), NOW, 1, 0.5
    )
    assert next_to_admit([low, high], Load({"r2": 9}, {"twitter": 9})) is high


def test_describe_keys_names_pool_and_media():
    assert describe_keys(["selenium", "account:twitter"]) == (
        "account pool (twitter) and selenium pool"
    )
