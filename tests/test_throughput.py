"""The pages-per-second series of a run: every page counted once, in a bounded number of
round-width buckets, whatever the run's length."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.planning.throughput import MAX_BUCKETS, WIDTHS_S, bucket, bucket_width_s

# From a clock slightly behind (an end before the start) to a run of a few years.
offsets = st.floats(min_value=-5.0, max_value=1e8, allow_nan=False, allow_infinity=False)


@given(st.lists(offsets, max_size=300), st.integers(min_value=1, max_value=200))
def test_throughput_buckets_count_every_page_once_within_the_bound(ends, max_buckets):
    series = bucket(ends, max_buckets)
    assert series.pages == len(ends)
    assert len(series.counts) <= max_buckets
    if ends:
        # The series ends with the last page: no empty tail.
        assert series.counts[-1] > 0


@given(st.lists(offsets, min_size=1, max_size=300))
def test_throughput_each_page_lands_in_the_bucket_of_its_offset(ends):
    series = bucket(ends)
    expected = [0] * len(series.counts)
    for offset in ends:
        expected[min(int(max(offset, 0.0) // series.width_s), len(expected) - 1)] += 1
    assert list(series.counts) == expected


@given(st.floats(min_value=0, max_value=1e9), st.integers(min_value=1, max_value=200))
def test_throughput_width_is_the_smallest_round_width_that_fits(span, max_buckets):
    width = bucket_width_s(span, max_buckets)
    assert math.floor(span / width) + 1 <= max_buckets
    smaller = [w for w in WIDTHS_S if w < width]
    if smaller and width in WIDTHS_S:
        assert math.floor(span / smaller[-1]) + 1 > max_buckets
    elif width > WIDTHS_S[-1]:
        assert math.floor(span / (width / 2)) + 1 > max_buckets


@pytest.mark.parametrize(
    ("ends", "width", "counts"),
    [
        ([], 1.0, ()),
        ([0.2, 0.9, 1.0, 3.5], 1.0, (2, 1, 0, 1)),
        ([-0.5, 0.0], 1.0, (2,)),  # an end before the start counts in the first bucket
        ([59.0], 1.0, (0,) * 59 + (1,)),
        ([60.0], 2.0, (0,) * 30 + (1,)),  # 61 one-second buckets would be too many
        ([3600.0 * 24], 1800.0, (0,) * 48 + (1,)),
    ],
)
def test_throughput_table(ends, width, counts):
    series = bucket(ends)
    assert (series.width_s, series.counts) == (width, counts)
    assert len(series.counts) <= MAX_BUCKETS


def test_throughput_rates_are_pages_per_second():
    assert bucket([0.1, 0.2, 2.5, 2.6, 2.7, 4.0]).rates() == [2.0, 0.0, 3.0, 0.0, 1.0]
    assert bucket([0.0, 100.0]).width_s == 2.0
    assert bucket([0.0, 1.0, 100.0]).rates()[0] == 1.0  # two pages in two seconds


@pytest.mark.parametrize("bad", [[math.nan], [math.inf], [0.0, -math.inf]])
def test_throughput_refuses_offsets_that_are_not_numbers(bad):
    with pytest.raises(ValueError, match="finite"):
        bucket(bad)


def test_throughput_refuses_a_bound_below_one():
    with pytest.raises(ValueError, match="max_buckets"):
        bucket_width_s(10.0, 0)
