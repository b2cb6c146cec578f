"""Notice targets on schedules: Apprise URLs checked, encrypted at rest and shown redacted, from
the command line and the API; bad URLs refused with a message that names no secret."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawlsched.runtime import Runtime
from crawlsched.schedules.notice_urls import parse_notice_url, public_schedule, scrub
from crawlsched.settings import Settings
from tests.support.api import ApiServer, seeded_runtime
from tests.support.cli_store import cli_on_fresh_store
from tests.support.workers import TEST_SECRET_KEY

BOT_TOKEN = "123456789:AAHsecretBOTtoken"
TELEGRAM = f"tgram://{BOT_TOKEN}/987654"
MAIL_PASSWORD = "mail-pw-9s7d"
MAIL = f"mailto://ops:{MAIL_PASSWORD}@crawl.example?to=team@crawl.example"
SLACK = "slack://T1234ABCD/B5678EFGH/slackSECRETxyz123/#crawls"
SECRETS = (BOT_TOKEN, "AAHsecretBOTtoken", MAIL_PASSWORD, "slackSECRETxyz123", "B5678EFGH")
BAD = [
    ("nothing://host/x", "nothing://"),
    ("https://hooks.example/x", "https://"),  # a webhook, not an Apprise URL
    ("tgram://", "tgram://"),  # a known scheme its service cannot use
    ("no scheme at all", "scheme://"),
]


# --- pure: parse, redact, scrub -------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown", "service"),
    [
        (TELEGRAM, "tgram://1...n", "Telegram"),
        (MAIL, "mailto://crawl.example", "E-Mail"),
        (SLACK, "slack://T...D", "Slack"),
        ("json://u:pw-json-1@127.0.0.1:8080/x", "json://127.0.0.1:8080", "JSON"),
    ],
)
def test_a_notice_url_is_shown_by_scheme_and_host_only(url, shown, service):
    target = parse_notice_url(url)
    assert (target.shown, target.service) == (shown, service)
    assert not any(secret in target.shown for secret in (*SECRETS, "pw-json-1"))


@pytest.mark.parametrize(("url", "named"), BAD)
def test_a_bad_notice_url_is_refused_naming_its_entry_not_its_text(url, named):
    with pytest.raises(ValueError, match="notices: entry 3") as refused:
        parse_notice_url(url, position=3)
    assert named in str(refused.value)
    assert url not in str(refused.value) or url.endswith("://")


def test_the_servers_a_notice_url_connects_to_are_named_per_service():
    assert parse_notice_url("json://127.0.0.1:9/x").hosts == (("127.0.0.1", 9),)
    assert parse_notice_url("xml://LOCALHOST/x").hosts == (("LOCALHOST", 0),)
    assert parse_notice_url("rsyslog://127.1:5514").hosts == (("127.1", 5514),)
    # E-mail: the SMTP server, not the sender's domain
    mail = "mailto://u:pw@example.com?smtp=2130706433&to=a@example.com"
    assert parse_notice_url(mail).hosts == (("2130706433", 25),)
    # Telegram's "host" is its bot id: no server of ours at all
    assert parse_notice_url(TELEGRAM).hosts == ()


@given(
    secret=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789-_", min_size=8),
    noise=st.text(max_size=40),
)
def test_scrub_removes_a_password_from_any_text_around_it(secret, noise):
    url = f"json://user:{secret}@127.0.0.1:8080/path"
    target = parse_notice_url(url)
    assert secret not in target.shown
    assert secret not in scrub(f"{noise}{secret}{noise} sent to {url}", url, target.shown)


@given(token=st.from_regex(r"[0-9]{6,10}:[A-Za-z0-9_-]{20,35}", fullmatch=True))
def test_a_telegram_token_never_shows(token):
    target = parse_notice_url(f"tgram://{token}/12345")
    assert token not in target.shown and token.split(":")[1] not in target.shown


def test_public_schedule_lists_the_redacted_forms_only():
    doc = {"_id": "s", "notify": {"on": ["failed"], "notices": [{"secret": "x", "shown": "a"}]}}
    assert public_schedule(doc)["notify"] == {"on": ["failed"], "notices": ["a"]}
    assert public_schedule({"_id": "t", "notify": None}) == {"_id": "t", "notify": None}


# --- the command line ------------------------------------------------------------------------


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Iterator:
    monkeypatch.setenv("CRAWLSCHED_SECRET_KEY", TEST_SECRET_KEY)
    with cli_on_fresh_store(monkeypatch, "notices") as (run, url):
        yield run, url


def _stored(url: str, schedule_id: str) -> dict:
    return Runtime(Settings(mongo_url=url)).db.schedules.find_one({"_id": schedule_id})


def test_cli_stores_notice_urls_encrypted_and_shows_them_redacted(cli):
    run, url = cli
    # When a schedule is added with three notice targets
    added = run(
        "schedules", "add", "nightly", "--every", "3600", "--collection", "websites",
        "--notice", TELEGRAM, "--notice", MAIL, "--notice", SLACK, "--json",
    )  # fmt: skip
    assert added.exit_code == 0, added.output

    # Then every output shows each by its redacted form, and no secret
    shown = ["tgram://1...n", "mailto://crawl.example", "slack://T...D"]
    assert json.loads(added.stdout)["notify"]["notices"] == shown
    listed = run("schedules", "list", "--json")
    show = run("schedules", "show", "nightly")
    show_json = run("schedules", "show", "nightly", "--json")
    assert json.loads(show_json.stdout)["notify"]["notices"] == shown
    for result in (added, listed, show, show_json):
        assert result.exit_code == 0
        assert not any(secret in result.output for secret in SECRETS)
        assert "gAAAA" not in result.output  # not even the ciphertext (Fernet tokens)

    # And the store holds them encrypted, decrypting to the URLs given
    doc = _stored(url, "nightly")
    assert not any(secret in repr(doc) for secret in SECRETS)
    box = Runtime(Settings(mongo_url=url, secret_key=TEST_SECRET_KEY)).secrets
    assert [box.decrypt(n["secret"]) for n in doc["notify"]["notices"]] == [TELEGRAM, MAIL, SLACK]


def test_cli_update_keeps_replaces_and_removes_notices(cli):
    run, url = cli
    assert run("schedules", "add", "s", "--every", "60", "--collection", "websites",
               "--notice", TELEGRAM).exit_code == 0  # fmt: skip
    sealed = _stored(url, "s")["notify"]["notices"]
    # An update of another field keeps the sealed target as it was
    assert run("schedules", "update", "s", "--every", "120").exit_code == 0
    assert _stored(url, "s")["notify"]["notices"] == sealed
    # A new list replaces it
    assert run("schedules", "update", "s", "--notice", SLACK).exit_code == 0
    assert [n["shown"] for n in _stored(url, "s")["notify"]["notices"]] == ["slack://T...D"]
    # An empty one removes them all
    assert run("schedules", "update", "s", "--notice", "").exit_code == 0
    assert _stored(url, "s")["notify"] is None


@pytest.mark.parametrize(("bad", "named"), BAD)
def test_cli_refuses_a_bad_notice_url_in_one_line_with_exit_2(cli, bad, named):
    run, url = cli
    result = run(
        "schedules", "add", "s", "--every", "60", "--collection", "websites",
        "--notice", TELEGRAM, "--notice", bad,
    )  # fmt: skip
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert "notices: entry 2" in line and named in line
    assert BOT_TOKEN not in line
    assert _stored(url, "s") is None


def test_cli_refuses_a_notice_to_a_private_address_unless_allowed(cli):
    run, url = cli
    result = run("schedules", "add", "s", "--every", "60", "--collection", "websites",
                 "--notice", "json://u:pw-1x@10.1.2.3:8080/x")  # fmt: skip
    assert result.exit_code == 2
    assert "CRAWLSCHED_TARGET_ALLOW_NETWORKS" in result.output and "pw-1x" not in result.output
    assert _stored(url, "s") is None


def test_cli_without_a_secret_key_refuses_notices(monkeypatch):
    monkeypatch.delenv("CRAWLSCHED_SECRET_KEY", raising=False)
    with cli_on_fresh_store(monkeypatch, "notices-nokey") as (run, url):
        result = run("schedules", "add", "s", "--every", "60", "--collection", "websites",
                     "--notice", TELEGRAM)  # fmt: skip
        assert result.exit_code == 2
        assert "CRAWLSCHED_SECRET_KEY" in result.output and BOT_TOKEN not in result.output
        assert _stored(url, "s") is None


# --- the API ---------------------------------------------------------------------------------


@pytest.fixture
def api(embedded_mongo_url: str) -> Iterator[ApiServer]:
    with ApiServer(seeded_runtime(embedded_mongo_url)) as server:
        yield server


def test_api_takes_notices_encrypted_and_answers_with_redacted_forms(api):
    # When a schedule is made with two notice targets
    created = api.admin.post(
        "/v1/schedules",
        json={
            "id": "n",
            "interval_s": 60,
            "collections": ["websites"],
            "notices": [TELEGRAM, MAIL],
        },
    )
    assert created.status_code == 201, created.text
    shown = ["tgram://1...n", "mailto://crawl.example"]
    answers = [
        created,
        api.reader.get("/v1/schedules/n"),
        api.reader.get("/v1/schedules"),
        api.admin.patch("/v1/schedules/n", json={"notify_on": ["failed"]}),
        api.admin.post("/v1/schedules/n/pause"),
    ]
    # Then every answer names them by their redacted form only
    for answer in answers:
        assert answer.status_code == 200 or answer is created, answer.text
        assert not any(secret in answer.text for secret in SECRETS)
        assert "gAAAA" not in answer.text
    assert answers[1].json()["notify"]["notices"] == shown
    assert answers[3].json()["notify"] == {"notices": shown, "on": ["failed"]}
    # And the store holds them encrypted
    doc = api.runtime.db.schedules.find_one({"_id": "n"})
    assert not any(secret in repr(doc) for secret in SECRETS)
    assert api.runtime.secrets.decrypt(doc["notify"]["notices"][1]["secret"]) == MAIL

    # And `[]` removes them
    cleared = api.admin.patch("/v1/schedules/n", json={"notices": []})
    assert cleared.status_code == 200 and cleared.json()["notify"] is None


@pytest.mark.parametrize(("bad", "named"), BAD)
def test_api_refuses_a_bad_notice_url_with_422(api, bad, named):
    for response in (
        api.admin.post(
            "/v1/schedules",
            json={"id": "b", "interval_s": 60, "collections": ["websites"], "notices": [bad]},
        ),
        api.admin.patch("/v1/schedules/sweep-websites", json={"notices": [TELEGRAM, bad]}),
    ):
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["errors"][0]["location"] == "body.notices"
        assert named in body["detail"] and BOT_TOKEN not in response.text
    assert "entry 2" in response.json()["detail"]  # the PATCH's second URL
    assert api.runtime.db.schedules.find_one({"_id": "b"}) is None
    assert api.runtime.db.schedules.find_one({"_id": "sweep-websites"}).get("notify") is None
