"""The pure pieces under the command line, property-tested: a stream cut into lines, a folder
through a bounded archive, a host named loosely, and how a run's end becomes an exit code."""

from __future__ import annotations

import itertools
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlsched.archives import tar_chunks, untar_bounded
from crawlsched.cli.watch import RESULT_CODES, Rate, exit_code, waits_text
from crawlsched.import_files import TOO_LONG, lines_of
from crawlsched.resources.host_grouping import is_pacing_key
from crawlsched.resources.host_names import host_candidates


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@given(st.binary(max_size=300), st.lists(st.integers(0, 300), max_size=10))
def test_lines_of_any_chunking_are_the_lines_of_the_whole(data, cuts):
    # A line ends at \n alone (bytes.splitlines would also cut at \r and others)
    expected = re.findall(rb"[^\n]*\n|[^\n]+\Z", data)
    assert list(lines_of(_cut(data, cuts))) == expected
    assert b"".join(expected) == data


@given(st.integers(1, 50), st.integers(0, 5), st.lists(st.integers(0, 80), max_size=5))
def test_a_line_longer_than_the_bound_is_one_too_long_line(extra, after, cuts):
    data = b"a\n" + b"x" * (10 + extra) + b"\n" + b"b\n" * after
    expected = [b"a\n", TOO_LONG, *[b"b\n"] * after]
    assert list(lines_of(_cut(data, cuts), max_line=10)) == expected


@settings(max_examples=30)
@given(
    st.dictionaries(
        st.from_regex(r"[a-z]{1,8}(/[a-z]{1,8})?", fullmatch=True),
        st.binary(max_size=2000),
        max_size=6,
    ),
    st.lists(st.integers(1, 5000), max_size=6),
)
def test_a_folder_comes_back_whole_through_an_archive_in_any_chunks(files, cuts):
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        source, target = Path(a), Path(b)
        for name, content in files.items():
            if any(other.startswith(name + "/") for other in files):
                continue  # a name that is also a folder
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes(content)
        archive = b"".join(tar_chunks(source))
        written = untar_bounded(_cut(archive, cuts), target, max_bytes=None)
        sent = {p.relative_to(source): p.read_bytes() for p in source.rglob("*") if p.is_file()}
        got = {p.relative_to(target): p.read_bytes() for p in target.rglob("*") if p.is_file()}
        assert got == sent and written == sum(len(c) for c in sent.values())


@given(st.integers(1, 4000))
def test_an_archive_that_unpacks_past_its_bound_is_refused(size):
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        (Path(a) / "f").write_bytes(b"\0" * size)
        archive = list(tar_chunks(Path(a)))
        with pytest.raises(ValueError, match="unpacks to more than"):
            untar_bounded(archive, Path(b), max_bytes=size - 1)
        assert untar_bounded(archive, Path(b) / "again", max_bytes=size) == size


LABEL = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
NAME = st.builds(".".join, st.lists(LABEL, min_size=2, max_size=4))


@given(NAME, st.one_of(st.none(), st.integers(1, 65535)))
def test_a_name_without_a_scheme_means_https_then_http_each_a_host_key(name, port):
    text = name if port is None else f"{name}:{port}"
    found = host_candidates(text)
    assert [key.split("://")[0] for key in found] == ["https", "http"]
    assert all(is_pacing_key(key) and name in key for key in found)
    if port is not None:
        assert all(key.endswith(f":{port}") for key in found)


@given(NAME, st.sampled_from(["http", "https"]), st.integers(1, 65535))
def test_an_origin_means_itself_alone(name, scheme, port):
    assert host_candidates(f"{scheme}://{name}:{port}/any") == [f"{scheme}://{name}:{port}"]


@given(LABEL.filter(lambda w: w != "localhost"))
def test_a_word_without_a_dot_is_no_host(word):
    with pytest.raises(ValueError, match="not a host"):
        host_candidates(word)


@pytest.mark.parametrize(
    ("result", "code"),
    [("succeeded", 0), ("incomplete", 3), ("failed", 4), ("stopped", 5), (None, 1)],
)
def test_a_run_s_end_is_an_exit_code(result, code):
    assert exit_code(result) == code
    assert len(set(RESULT_CODES.values())) == len(RESULT_CODES)


@given(st.lists(st.tuples(st.floats(0.01, 5), st.integers(0, 20)), min_size=1, max_size=30))
def test_pages_per_second_are_done_pages_over_the_time_they_took(steps):
    rate, at, done = Rate(), 0.0, 0
    for gap, more in steps:
        at, done = at + gap, done + more
        per_s = rate.add(at, done)
    (t0, d0), (t1, d1) = rate.seen[0], rate.seen[-1]
    assert per_s == pytest.approx((d1 - d0) / (t1 - t0) if t1 > t0 else 0.0)
    assert per_s >= 0


def test_what_waits_is_said_by_its_largest_group():
    assert waits_text({"waiting": []}) == "nothing waits"
    groups = [
        {"needs": ["host:https://a:443"], "batches": 1},
        {"needs": ["account:x"], "batches": 3},
    ]
    assert waits_text({"waiting": groups}) == "3 batches wait for account:x (+1 more)"
