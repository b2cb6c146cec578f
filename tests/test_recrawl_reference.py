"""A media's `recrawl` policy in the reference file: what loads, what is refused and why, and
what `init-db` writes to the media row."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
import yaml

from crawlsched.errors import ReferenceDataError
from crawlsched.reference import load_reference
from crawlsched.runtime import Runtime
from tests.conftest import settings_for_tests


def reference_with(tmp_path: Path, recrawl) -> Path:
    """The packaged reference with the `web` media's recrawl set to `recrawl`."""
    packaged = resources.files("crawlsched.reference").joinpath("default.yaml")
    raw = yaml.safe_load(packaged.read_text())
    for media in raw["media"]:
        if media["name"] == "web":
            media["recrawl"] = recrawl
    path = tmp_path / "reference.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_the_packaged_reference_makes_web_adaptive_and_the_rest_fixed():
    media = {m.name: m for m in load_reference().media}
    assert media["web"].recrawl is not None and media["web"].recrawl.adaptive
    assert (media["web"].recrawl.min_interval_s, media["web"].recrawl.max_interval_s) == (
        3600, 2592000,
    )  # fmt: skip
    assert all(m.recrawl is None for name, m in media.items() if name != "web")


def test_defaults_fill_what_the_mapping_leaves_out(tmp_path):
    (web,) = [m for m in load_reference(reference_with(tmp_path, {})).media if m.name == "web"]
    assert web.recrawl.adaptive is False  # a mapping alone does not make a media adaptive
    assert (web.recrawl.min_interval_s, web.recrawl.max_interval_s) == (3600, 30 * 86400)
    assert web.recrawl.inc_rate is web.recrawl.dec_rate is web.recrawl.jitter is None


@pytest.mark.parametrize(
    ("recrawl", "message"),
    [
        ({"adaptive": True, "min_interval_s": 7200, "max_interval_s": 3600},
         "min_interval_s (7200) must be <= max_interval_s (3600)"),
        ({"min_interval_s": -5}, "min_interval_s\n  Input should be greater than 0"),
        ({"max_interval_s": 0}, "max_interval_s\n  Input should be greater than 0"),
        ({"adaptiv": True, "speed": 2}, "unknown key(s) ['adaptiv', 'speed']; known: adaptive, "
         "min_interval_s, max_interval_s, inc_rate, dec_rate, jitter, method, interval_per_mean, "
         "memory"),
        ({"adaptive": "sometimes"}, "adaptive\n  Input should be a valid boolean"),
        ({"dec_rate": 1.5}, "dec_rate\n  Input should be less than 1"),
        ({"inc_rate": 0}, "inc_rate\n  Input should be greater than 0"),
        ({"jitter": -0.1}, "jitter\n  Input should be greater than or equal to 0"),
        ({"method": "guess"}, "method\n  Input should be 'estimate' or 'steps'"),
        ({"interval_per_mean": 0}, "interval_per_mean\n  Input should be greater than 0"),
        ({"memory": 1.5}, "memory\n  Input should be less than or equal to 1"),
        ({"min_interval_s": "1h"}, "min_interval_s\n  Input should be a valid number"),
        ([3600, 86400], "recrawl must be a mapping, got list"),
    ],
)  # fmt: skip
def test_a_bad_recrawl_policy_is_refused_with_a_clear_message(tmp_path, recrawl, message):
    with pytest.raises(ReferenceDataError) as refused:
        load_reference(reference_with(tmp_path, recrawl))
    assert "media.4.recrawl" in str(refused.value)  # where: the fifth media row, `web`
    assert message in str(refused.value)


def test_init_db_writes_the_policy_on_the_media_row(embedded_mongo_url, tmp_path):
    rt = Runtime(settings_for_tests(mongo_url=embedded_mongo_url, broker_url="stub://"))
    policy = {"adaptive": True, "max_interval_s": 7 * 86400, "dec_rate": 0.5}
    rt.reference.load(load_reference(reference_with(tmp_path, policy)))
    web = rt.reference.media_by_name("web")
    assert web["recrawl"] == {
        "adaptive": True, "min_interval_s": 3600, "max_interval_s": 7 * 86400,
        "inc_rate": None, "dec_rate": 0.5, "jitter": None,
        "method": None, "interval_per_mean": None, "memory": None,
    }  # fmt: skip
    assert rt.reference.media_by_name("twitter")["recrawl"] is None
    chosen = rt.recrawl_policy(web)
    assert (chosen.adaptive, chosen.dec_rate, chosen.inc_rate) == (True, 0.5, 0.4)
    assert (chosen.method, chosen.interval_per_mean, chosen.memory) == ("estimate", 2.0, 0.95)
