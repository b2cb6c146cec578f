"""Media rows as the command line edits them (`crawlsched.reference.media_rows`): read back
from the store as the reference file has them, changed, and checked by the file's own model."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.errors import ReferenceDataError
from crawlsched.reference import load_reference
from crawlsched.reference.media_rows import changed_row, stored_row
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from crawlsched.store.client import drop_embedded

DRIVERS = ["http", "browser", "website", "noop", "demo_social"]
PACKAGED = {m.name: m for m in load_reference().media}
WEB = PACKAGED["web"].model_dump(exclude_none=True)


@pytest.fixture(scope="module")
def stored():
    url = "mongomock://media-rows-roundtrip"
    rt = Runtime(Settings(mongo_url=url, broker_url="stub://"))
    rt.reference.load(load_reference())
    yield rt
    drop_embedded(url)


@pytest.mark.parametrize("name", sorted(PACKAGED))
def test_a_stored_row_reads_back_as_the_reference_row_it_was(stored, name):
    media = stored.reference.media_by_name(name)
    tasks = stored.reference.tasks_of(media["media_name_id"]).values()
    assert changed_row(stored_row(media, tasks), {}, {}, DRIVERS) == PACKAGED[name]


@given(st.integers(-10, 1100), st.integers(-10, 20_000_000))
def test_bounds_are_taken_exactly_when_the_reference_file_would(depth, pages):
    valid = 0 <= depth <= 1000 and 0 <= pages <= 10_000_000
    try:
        row = changed_row(WEB, {"max_depth": depth, "max_pages": pages}, {}, DRIVERS)
    except ReferenceDataError as e:
        assert not valid
        assert ("max_depth" in str(e)) == (not 0 <= depth <= 1000)
        assert ("max_pages" in str(e)) == (not 0 <= pages <= 10_000_000)
    else:
        assert valid and (row.max_depth, row.max_pages) == (depth, pages)


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "delay_s": st.floats(-1, 61, allow_nan=False),
            "concurrency": st.integers(-1, 70),
            "daily_pages": st.integers(-1, 10),
        },
    )
)
def test_politeness_is_merged_into_what_is_stored(politeness):
    current = {**WEB, "politeness": {"delay_s": 5.0, "concurrency": 1}}
    try:
        row = changed_row(current, {"politeness": politeness}, {}, DRIVERS)
    except ReferenceDataError as e:
        assert str(e).startswith("politeness.")
        return
    merged = {"delay_s": 5.0, "concurrency": 1, **politeness}
    assert row.politeness.model_dump(exclude_none=True) == merged


@given(st.dictionaries(st.sampled_from(sorted(WEB)), st.none()))
def test_options_not_given_change_nothing(unchanged):
    assert changed_row(WEB, unchanged, {}, DRIVERS) == PACKAGED["web"]


def test_a_new_task_gets_the_defaults_and_a_known_driver_is_required():
    row = changed_row(WEB, {}, {"comment": {"crawl_limit": 9}}, DRIVERS)
    assert row.tasks["comment"].crawl_limit == 9
    assert row.tasks["article"] == PACKAGED["web"].tasks["article"]
    with pytest.raises(ReferenceDataError, match="driver_class: no crawl driver named 'x'"):
        changed_row(WEB, {"driver_class": "x"}, {}, DRIVERS)
    with pytest.raises(ReferenceDataError, match="tasks: a media needs at least one task"):
        changed_row(None, {"name": "n", "id": 7, "driver_class": "http"}, {}, DRIVERS)
