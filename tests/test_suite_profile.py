"""The suite's own promises: property tests have no wall-clock deadline."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=5)
@given(st.integers())
def _a_property_with_its_own_settings(_):
    pass


def test_suite_profile_has_no_deadline():
    assert settings.default.deadline is None


def test_per_test_settings_inherit_no_deadline():
    # A per-test @settings keeps every profile field it does not name, deadline included.
    assert _a_property_with_its_own_settings._hypothesis_internal_use_settings.deadline is None


@pytest.mark.parametrize(
    ("ci", "fails"),
    [("true", True), ("1", True), ("yes", True), ("github-actions", True), ("TRUE", True),
     ("", False), ("0", False), ("false", False), ("no", False)],
)  # fmt: skip
def test_a_missing_service_fails_under_any_ci_value(monkeypatch, ci, fails):
    from tests.support.services import service_unavailable

    monkeypatch.setenv("CI", ci)
    expected = pytest.fail.Exception if fails else pytest.skip.Exception
    with pytest.raises(expected, match="RabbitMQ unavailable"):
        service_unavailable("RabbitMQ unavailable: test")
