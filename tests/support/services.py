"""What a fixture does when a real service (RabbitMQ, the multi-process MongoDB) is missing."""

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def service_unavailable(reason: str) -> NoReturn:
    """Fail under CI=true, where a skip would hide that the tests never ran; skip locally."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: refusing to skip)", pytrace=False)
    pytest.skip(reason)
