"""`crawlsched proxies …` and `crawlsched accounts bind` on the embedded store, and once
through the API (a real uvicorn): bad input in one line, and never a password in any output."""

import uuid
from collections.abc import Callable, Iterator

import pytest
from typer.testing import CliRunner, Result

from crawlsched.cli import app
from crawlsched.cli.remote import RemoteBackend
from crawlsched.resources.rules import AccountLimits
from crawlsched.resources.secrets import generate_key
from crawlsched.store.client import drop_embedded
from tests.support.api import serving

Invoke = Callable[..., Result]
KEY = generate_key()
PASSWORD = "pr0xy-pa55-never-shown"
ADD_DC1 = ("proxies", "add", "dc-1", "http://127.0.0.1:3128", "--group", "dc")
WITH_LOGIN = ("--username", "u1", "--password-env", "TEST_PROXY_PASSWORD")


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Iterator[Invoke]:
    url = f"mongomock://cli-proxies-{uuid.uuid4().hex}"
    monkeypatch.setenv("CRAWLSCHED_MONGO_URL", url)
    monkeypatch.setenv("CRAWLSCHED_SECRET_KEY", KEY)
    monkeypatch.setenv("TEST_PROXY_PASSWORD", PASSWORD)
    monkeypatch.setenv("TEST_ACCOUNT_SECRET", "account-secret")
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(app, list(args))

    assert run("init-db").exit_code == 0
    added = run("accounts", "add", "twitter", "alice", "--secret-env", "TEST_ACCOUNT_SECRET")
    assert added.exit_code == 0, added.output
    yield run
    drop_embedded(url)


def one_line(result: Result) -> str:
    return " ".join(result.output.split())


def test_proxies_add_list_disable_enable_bind_remove_never_show_the_password(invoke: Invoke):
    results = [invoke(*ADD_DC1, *WITH_LOGIN, "--max-concurrent", "3")]
    assert results[0].exit_code == 0, results[0].output
    assert "proxy dc-1 added: http://127.0.0.1:3128, group dc, tier 0" in one_line(results[0])

    results.append(invoke("proxies", "disable", "dc-1"))
    assert "proxy dc-1 is now disabled" in one_line(results[-1])
    results.append(invoke("proxies", "list"))
    assert "dc-1" in results[-1].output and "disabled" in results[-1].output
    results.append(invoke("proxies", "enable", "dc-1"))
    assert "proxy dc-1 is now active" in one_line(results[-1])

    results.append(invoke("accounts", "bind", "twitter", "alice", "--proxy", "dc-1"))
    assert "account alice (twitter) bound to proxy dc-1" in one_line(results[-1])
    results.append(invoke("proxies", "list", "--json"))
    assert '"accounts": ["twitter/alice"]' in results[-1].output
    assert '"max_concurrent": 3' in results[-1].output
    results.append(invoke("accounts", "bind", "twitter", "alice", "--group", "dc"))
    assert "bound to group dc" in one_line(results[-1])
    results.append(invoke("accounts", "bind", "twitter", "alice", "--none"))
    assert "account alice (twitter) unbound" in one_line(results[-1])

    results.append(invoke("pools"))
    assert "proxy" in results[-1].output
    results.append(invoke("proxies", "tiers"))
    assert "tiers the enabled proxies offer: 0" in one_line(results[-1])
    results.append(invoke("proxies", "remove", "dc-1"))
    assert "proxy dc-1 removed (0 account(s) unbound)" in one_line(results[-1])
    for result in results:
        assert result.exit_code == 0, result.output
        assert PASSWORD not in result.output


BAD_INPUT = [
    (("proxies", "add", "dc-1", "http://u:p@127.0.0.1:3128"), "not in its URL"),
    (("proxies", "add", "dc-1", "gopher://127.0.0.1:70"), "scheme must be one of"),
    ((*ADD_DC1, "--password-env", "TEST_PROXY_PASSWORD"), "goes with its --username"),
    ((*ADD_DC1, "--username", "u1", "--password-env", "NOPE_UNSET"), "NOPE_UNSET is empty"),
    (("proxies", "enable", "nope"), "no proxy 'nope'"),
    (("proxies", "remove", "nope"), "no proxy 'nope'"),
    (("accounts", "bind", "twitter", "alice", "--proxy", "nope"), "no proxy 'nope'"),
    (("accounts", "bind", "twitter", "alice", "--group", "nope"), "no proxy is in group"),
    (("accounts", "bind", "twitter", "alice"), "give one of --proxy"),
    (("accounts", "bind", "twitter", "alice", "--proxy", "a", "--none"), "give one of"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUT, ids=lambda v: " ".join(v)[:40])
def test_proxy_commands_refuse_bad_input_in_one_line_and_store_nothing(
    invoke: Invoke, args, message
):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert message in one_line(result), result.output
    assert '"name"' not in invoke("proxies", "list", "--json").output


def test_proxy_commands_through_the_api_never_show_the_password(monkeypatch):
    monkeypatch.setenv("TEST_PROXY_PASSWORD", PASSWORD)
    monkeypatch.setenv("COLUMNS", "200")
    with serving(f"mongomock://cli-proxies-api-{uuid.uuid4().hex}") as api:
        api.runtime.inventory.add_account(
            "twitter", "alice", "pw", AccountLimits(), api.runtime.now()
        )
        backend = RemoteBackend(api.url, api.admin_token, "the test")

        def through(*args: str) -> Result:
            return CliRunner().invoke(app, list(args), obj={"backend": backend})

        results = [
            through(*ADD_DC1, *WITH_LOGIN),
            through("accounts", "bind", "twitter", "alice", "--proxy", "dc-1"),
            through("proxies", "disable", "dc-1"),
            through("proxies", "list", "--json"),
            through("proxies", "tiers", "--json"),
            through("pools", "--json"),
            through("proxies", "remove", "dc-1"),
        ]
        refused = through("proxies", "add", "dc-2", "http://u:p@127.0.0.1:3128")
    for result in results:
        assert result.exit_code == 0, result.output
        assert PASSWORD not in result.output
    assert '"state": "disabled"' in results[3].output
    assert '"proxy": {"resources": 1' in results[5].output
    assert "proxy dc-1 removed (1 account(s) unbound)" in one_line(results[6])
    assert refused.exit_code == 2 and "not in its URL" in one_line(refused)
