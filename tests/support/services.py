"""What a fixture does when a real service (RabbitMQ, the multi-process MongoDB) is missing."""

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Any CI value but an explicit false: CI systems say `true`, `1`, `yes` or their name."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def service_unavailable(reason: str) -> NoReturn:
    """Fail under CI, where a skip would hide that the tests never ran; skip locally."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set: refusing to skip)", pytrace=False)
    pytest.skip(reason)
