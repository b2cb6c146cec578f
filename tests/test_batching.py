"""make_batches: step 3, grouping each category's jobs by media and cutting them under limits."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.planning.batching import Batch, BatchCutter, make_batches
from crawlsched.planning.due import Category, DueJob

CATEGORY_ORDER = list(Category)


def job(job_id, media="twitter", media_id=1, login=False, selenium=False, batch_limit=None):
    return DueJob(
        id=job_id,
        target=f"target-{job_id}",
        media_name=media,
        media_id=media_id,
        driver_class="http",
        used_tool="httpx",
        need_login=login,
        need_selenium=selenium,
        crawl_limit=10,
        batch_limit=batch_limit,
    )


# A media's batch limit comes from its one core_tasks row, so it is the same on all its jobs.
media_rows = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d", "e"]), st.none() | st.integers(1, 6)),
    min_size=1,
    max_size=5,
    unique_by=lambda row: row[0],
)


@st.composite
def categorized_jobs(draw):
    media = draw(media_rows)
    picks = draw(
        st.lists(
            st.tuples(st.sampled_from(media), st.booleans(), st.booleans()),
            max_size=40,
        )
    )
    categorized = {}
    for job_id, ((name, limit), login, selenium) in enumerate(picks):
        due = job(job_id, name, ord(name), login, selenium, limit)
        categorized.setdefault(due.category, []).append(due)
    default_limit = draw(st.integers(1, 8))
    return categorized, dict(media), default_limit


@settings(max_examples=100)
@given(categorized_jobs())
def test_make_batches_properties(case):
    categorized, limits, default_limit = case
    jobs = {j.id: j for jobs in categorized.values() for j in jobs}

    batches = make_batches("profiles", "profile", categorized, default_limit)

    # Every job appears exactly once.
    seen = Counter(job_id for batch in batches for job_id in batch.job_ids)
    assert seen == Counter(list(jobs))
    for batch in batches:
        # No empty batch, none above its media's limit; one media and one category per batch.
        limit = limits[batch.media_name] or default_limit
        assert 1 <= len(batch.job_ids) <= limit
        assert {jobs[i].media_name for i in batch.job_ids} == {batch.media_name}
        assert {jobs[i].category for i in batch.job_ids} == {batch.category}
        assert (batch.need_login, batch.need_selenium) == (
            jobs[batch.job_ids[0]].need_login,
            jobs[batch.job_ids[0]].need_selenium,
        )
        assert (batch.collection, batch.task) == ("profiles", "profile")
    # Categories come in enum order.
    positions = [CATEGORY_ORDER.index(b.category) for b in batches]
    assert positions == sorted(positions)
    # Within one (category, media) the batches, read in order, give back the input order, and
    # they are cut as full as the limit allows (only the last may be short).
    for category, due in categorized.items():
        for media in {j.media_name for j in due}:
            group = [b for b in batches if (b.category, b.media_name) == (category, media)]
            expected = [j.id for j in due if j.media_name == media]
            assert [i for b in group for i in b.job_ids] == expected
            limit = limits[media] or default_limit
            assert all(len(b.job_ids) == limit for b in group[:-1])


@given(st.integers(max_value=0))
def test_make_batches_rejects_default_limit_below_one(default_limit):
    with pytest.raises(ValueError, match="default_limit"):
        make_batches("profiles", "profile", {Category.NEITHER: [job(1)]}, default_limit)


def test_make_batches_cuts_each_media_under_its_own_limit():
    # twitter's row says 2 per batch; youtube has no batch_limit, so the default 3 applies.
    categorized = {
        Category.NEITHER: [
            job(1, "twitter", 1, batch_limit=2),
            job(2, "youtube", 4),
            job(3, "twitter", 1, batch_limit=2),
            job(4, "youtube", 4),
            job(5, "twitter", 1, batch_limit=2),
            job(6, "youtube", 4),
            job(7, "youtube", 4),
        ]
    }

    batches = make_batches("profiles", "profile", categorized, default_limit=3)

    # Batches leave as soon as they are full (planning streams); the short ones at the end.
    assert [(b.media_name, b.job_ids) for b in batches] == [
        ("twitter", (1, 3)),
        ("youtube", (2, 4, 6)),
        ("twitter", (5,)),
        ("youtube", (7,)),
    ]


def test_make_batches_orders_categories_as_the_enum_whatever_the_mapping_order():
    categorized = {
        Category.NEITHER: [job(1)],
        Category.SELENIUM_AND_LOGIN: [job(2, login=True, selenium=True)],
        Category.ONLY_LOGIN: [job(3, login=True)],
        Category.ONLY_SELENIUM: [job(4, selenium=True)],
    }

    batches = make_batches("profiles", "profile", categorized, default_limit=5)

    assert [(b.category, b.job_ids) for b in batches] == [
        (Category.ONLY_LOGIN, (3,)),
        (Category.ONLY_SELENIUM, (4,)),
        (Category.SELENIUM_AND_LOGIN, (2,)),
        (Category.NEITHER, (1,)),
    ]


def test_make_batches_of_nothing_is_no_batch():
    assert make_batches("profiles", "profile", {}, default_limit=5) == []
    assert make_batches("profiles", "profile", {c: [] for c in Category}, 5) == []


def test_a_batch_carries_what_its_first_job_says_of_the_media():
    # Every field of the message comes from the media and task rows the first job joined.
    first = DueJob(
        id="a",
        target="alice",
        media_name="mastodon",
        media_id=42,
        driver_class="social",
        used_tool="browser",
        need_login=True,
        need_selenium=True,
        crawl_limit=25,
        batch_limit=None,
    )
    second = DueJob(**{**first.__dict__, "id": "b", "driver_class": "other", "crawl_limit": 3})

    (batch,) = make_batches(
        "profiles", "profile", {Category.SELENIUM_AND_LOGIN: [first, second]}, 5
    )

    assert batch == Batch(
        collection="profiles",
        task="profile",
        category=Category.SELENIUM_AND_LOGIN,
        media_name="mastodon",
        media_id=42,
        driver_class="social",
        need_login=True,
        need_selenium=True,
        crawl_limit=25,
        job_ids=("a", "b"),
    )


def test_batch_cutter_hands_a_batch_over_the_moment_it_is_full():
    cutter = BatchCutter("profiles", "profile", default_limit=2)

    assert cutter.add(job(1, "twitter", batch_limit=3)) is None
    assert cutter.add(job(2, "youtube")) is None
    assert cutter.add(job(3, "twitter", batch_limit=3)) is None
    full = cutter.add(job(4, "twitter", batch_limit=3))
    assert full is not None and full.job_ids == (1, 3, 4)
    # A limit of one: every job is a batch of its own, at once.
    assert cutter.add(job(5, "vimeo", batch_limit=1)).job_ids == (5,)
    assert cutter.add(job(6, "vimeo", batch_limit=1)).job_ids == (6,)
    # The partial ones in the order their buckets were opened; then nothing is held.
    assert cutter.add(job(7, "twitter")) is None
    assert [(b.media_name, b.job_ids) for b in cutter.flush()] == [
        ("youtube", (2,)),
        ("twitter", (7,)),
    ]
    assert cutter.flush() == []


@pytest.mark.parametrize("default_limit", [0, -1])
def test_batch_cutter_names_a_default_limit_below_one(default_limit):
    with pytest.raises(ValueError) as caught:
        BatchCutter("profiles", "profile", default_limit)
    assert str(caught.value) == f"default_limit must be >= 1, got {default_limit}"
    assert BatchCutter("profiles", "profile", 1).add(job(1)).job_ids == (1,)
