"""Every invalid setting is rejected at start-up: exit 2 and one line naming the variable."""

from __future__ import annotations

import contextlib
import io
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.settings import Settings, load_settings_or_exit

SECONDS_FIELDS = {
    name: field
    for name, field in Settings.model_fields.items()
    if name.endswith("_s") and field.annotation in (float, float | None)
}


def _upper(name: str) -> float:
    return next(m.le for m in Settings.model_fields[name].metadata if hasattr(m, "le"))


def test_every_seconds_setting_has_a_finite_ceiling():
    assert len(SECONDS_FIELDS) >= 10
    for name in SECONDS_FIELDS:
        assert math.isfinite(_upper(name)), name


def _zero_allowed(name: str) -> bool:
    """Whether 0 is a valid value (`ge=0`, e.g. no per-host delay) rather than `gt=0`."""
    return any(getattr(m, "ge", None) == 0 for m in Settings.model_fields[name].metadata)


@st.composite
def bad_seconds(draw) -> tuple[str, str]:
    name = draw(st.sampled_from(sorted(SECONDS_FIELDS)))
    bad_words = ["inf", "-inf", "nan", "1e308", "Infinity", "-1", "", "abc"]
    below = st.floats(max_value=0, exclude_max=_zero_allowed(name))
    if not _zero_allowed(name):
        bad_words.append("0")
    else:
        below = below.filter(lambda v: v != 0)  # -0.0 is 0 too
    value = draw(
        st.one_of(
            st.sampled_from(bad_words),
            below.map(repr),
            st.floats(min_value=_upper(name), exclude_min=True).map(repr),
        )
    )
    return name, value


def _exit_line(env: dict[str, str]) -> tuple[int, str]:
    err = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(err):
        for key in [k for k in os.environ if k.startswith("CRAWLSCHED_")]:
            patch.delenv(key)
        for key, value in env.items():
            patch.setenv(key, value)
        with pytest.raises(SystemExit) as exited:
            load_settings_or_exit()
    return exited.value.code, err.getvalue()


@given(bad_seconds())
def test_bad_seconds_value_exits_2_naming_the_field(case):
    name, value = case
    code, err = _exit_line({f"CRAWLSCHED_{name.upper()}": value})
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith(f"invalid setting CRAWLSCHED_{name.upper()}:"), err


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("CRAWLSCHED_LOG_LEVEL", "LOUD"),
        ("CRAWLSCHED_DRIVER_MODULES", '["no.such.module"]'),
        ("CRAWLSCHED_DRIVER_MODULES", "not json"),
        ("CRAWLSCHED_DRIVER_MODULES", '["os; rm -rf"]'),
        ("CRAWLSCHED_MAX_ATTEMPTS", "1e9"),
        ("CRAWLSCHED_DEFAULT_BATCH_LIMIT", "200000"),
        ("CRAWLSCHED_TARGET_ALLOW_NETWORKS", '["everything"]'),
        ("CRAWLSCHED_PROXY_ALLOW_NETWORKS", '["everything"]'),
        ("CRAWLSCHED_PROXY_BACKOFF_CAP_S", "-1"),
        ("CRAWLSCHED_SESSION_MAX_USES", "0"),
        ("CRAWLSCHED_MESSAGE_SIGNING_KEY", "short"),
        ("CRAWLSCHED_MONGO_URL", "http://x"),
    ],
)
def test_bad_named_setting_exits_2_naming_it(var, value):
    code, err = _exit_line({var: value})
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"invalid setting {var}:"), err


def test_cli_reports_a_bad_setting_in_one_line():
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLSCHED_")}
    env["CRAWLSCHED_RESOURCE_LEASE_S"] = "inf"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "crawlsched"), "jobs", "summary"],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "invalid setting CRAWLSCHED_RESOURCE_LEASE_S: Input should be a finite number"
    ]
