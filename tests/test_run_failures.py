"""Why a run's pages failed, counted by HTTP status and by kind of error (`planning.failures`),
from the fields a row keeps or, for a row written before them, from its error text."""

from __future__ import annotations

import pytest

from crawlsched.drivers.base import DriverError, HttpStatusError
from crawlsched.drivers.fetching import FetchFailed
from crawlsched.planning.failures import failure_counts, failure_fields, failure_of, page_of


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"outcome": "succeeded", "error": None}, (None, None)),
        ({"error": "HttpStatusError: GET u answered 404", "error_kind": "HttpStatusError",
          "http_status": 404}, ("HttpStatusError", 404)),
        # Rows written before the fields: read from the text
        ({"outcome": "failed", "error": "DriverError: GET http://h/x answered 404"},
         ("DriverError", 404)),
        ({"outcome": "failed", "error": "DriverError: login answered 503"}, ("DriverError", 503)),
        ({"outcome": "failed", "error": "FetchFailed: GET http://h/: HTTP 500 twice"},
         ("FetchFailed", 500)),
        ({"outcome": "expired", "error": "reclaimed: dispatch lease ran out"}, ("reclaimed", None)),
        ({"outcome": "expired", "error": "the dispatch lease ran out"}, ("expired", None)),
        # A status in a URL's path is no status
        ({"outcome": "failed", "error": "Refused: http://h/answered/404"}, ("Refused", None)),
    ],
)  # fmt: skip
def test_failure_of_reads_the_fields_or_the_text(row, expected):
    assert failure_of(row) == expected


def test_failure_fields_keep_the_kind_and_only_a_real_status():
    assert failure_fields(HttpStatusError("GET u answered 404", 404)) == {
        "error_kind": "HttpStatusError",
        "http_status": 404,
    }
    assert failure_fields(FetchFailed("timed out")) == {"error_kind": "FetchFailed"}
    odd = DriverError("x")
    odd.status = "404"  # not an int: not a status
    assert failure_fields(odd) == {"error_kind": "DriverError"}


def test_failure_counts_by_status_and_by_kind_most_common_first():
    rows = [
        {"outcome": "succeeded"},
        {"error": "HttpStatusError: a", "error_kind": "HttpStatusError", "http_status": 404},
        {"error": "HttpStatusError: b", "error_kind": "HttpStatusError", "http_status": 500},
        {"error": "HttpStatusError: c", "error_kind": "HttpStatusError", "http_status": 404},
        {"error": "FetchFailed: d", "error_kind": "FetchFailed"},
    ]
    counts = failure_counts(rows)
    assert counts == {
        "by_status": {"404": 2, "500": 1},
        "by_kind": {"HttpStatusError": 3, "FetchFailed": 1},
    }
    assert list(counts["by_kind"]) == ["HttpStatusError", "FetchFailed"]


def test_page_of_is_the_url_else_the_target():
    assert page_of({"url": "http://h/x", "target": "t"}) == "http://h/x"
    assert page_of({"target": "alice"}) == "alice"
    assert page_of({"url": ""}) is None
