"""`crawlsched accounts|nodes|pools|run resources` on the embedded store, bad input included."""

import uuid
from collections.abc import Callable, Iterator

import pytest
from typer.testing import CliRunner, Result

from crawlsched.cli import app
from crawlsched.resources.secrets import generate_key
from crawlsched.runtime import Runtime
from crawlsched.settings import Settings
from crawlsched.store.client import drop_embedded
from tests.support.js_site import JsSite

Invoke = Callable[..., Result]
KEY = generate_key()


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch) -> Iterator[Invoke]:
    url = f"mongomock://cli-pools-{uuid.uuid4().hex}"
    monkeypatch.setenv("CRAWLSCHED_MONGO_URL", url)
    monkeypatch.setenv("CRAWLSCHED_SECRET_KEY", KEY)
    monkeypatch.setenv("TEST_ACCOUNT_SECRET", "hunter2-not-shown")
    monkeypatch.setenv("CRAWLSCHED_NODE_ALLOW_NETWORKS", '["127.0.0.1/32"]')  # nodes on loopback
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(app, list(args))

    assert run("init-db").exit_code == 0
    yield run
    drop_embedded(url)


def one_line(result: Result) -> str:
    return " ".join(result.output.split())


def test_accounts_add_list_ban_enable_never_show_the_secret(invoke: Invoke):
    added = invoke("accounts", "add", "twitter", "alice", "--secret-env", "TEST_ACCOUNT_SECRET")
    assert added.exit_code == 0, added.output
    rt = Runtime(Settings())
    stored = rt.db.accounts.find_one({"username": "alice"})
    assert "hunter2" not in repr(stored)  # encrypted at rest

    assert (
        invoke("accounts", "ban", "twitter", "alice", "--reason", "login rejected").exit_code == 0
    )
    listed = invoke("accounts", "list")
    assert "banned" in listed.output and "login rejected" in one_line(listed)
    assert invoke("accounts", "enable", "twitter", "alice").exit_code == 0
    listed = invoke("accounts", "list", "--json")
    assert '"state": "active"' in listed.output
    for result in (added, listed, invoke("pools")):
        assert "hunter2" not in result.output


ADD_BOB = ("accounts", "add", "twitter", "bob", "--secret-env", "TEST_ACCOUNT_SECRET")
BAD_INPUT = [
    (("accounts", "add", "myspace", "bob", *ADD_BOB[4:]), {}, "unknown media 'myspace'"),
    ((*ADD_BOB[:4], "--secret-env", "NOPE_UNSET"), {}, "NOPE_UNSET is empty or unset"),
    (ADD_BOB, {"CRAWLSCHED_SECRET_KEY": ""}, "CRAWLSCHED_SECRET_KEY is not set"),
    (ADD_BOB, {"CRAWLSCHED_SECRET_KEY": "not-a-key"}, "not a valid key"),
    ((*ADD_BOB, "--rate-uses", "3"), {}, "give both or neither"),
    (("accounts", "ban", "twitter", "nobody"), {}, "no account 'nobody'"),
    (("nodes", "drain", "http://127.0.0.1:1"), {}, "no Selenium node"),
]


@pytest.mark.parametrize(("args", "env", "message"), BAD_INPUT)
def test_pool_commands_reject_bad_input_in_one_line_and_store_nothing(
    invoke: Invoke, monkeypatch: pytest.MonkeyPatch, args, env, message
):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = invoke(*args)
    assert result.exit_code in (1, 2), result.output
    assert message in one_line(result), result.output
    assert "Traceback" not in result.output
    monkeypatch.setenv("CRAWLSCHED_SECRET_KEY", KEY)
    rt = Runtime(Settings())
    assert rt.db.accounts.count_documents({"username": "bob"}) == 0


def test_nodes_add_refuses_what_is_not_a_webdriver_endpoint(invoke: Invoke):
    # (No node answers there: a URL to fix, exit 2, as the API's 404.)
    with JsSite() as site:  # a plain web server: /status is a 404
        result = invoke("nodes", "add", site.base_url)
    assert result.exit_code == 2
    assert "unreachable: /status answered HTTP 404" in one_line(result)
    closed = invoke("nodes", "add", "http://127.0.0.1:1")
    assert closed.exit_code == 2 and "unreachable" in one_line(closed)
    assert invoke("nodes", "add", "ftp://127.0.0.1:1").exit_code != 0
    assert Runtime(Settings()).db.selenium_nodes.count_documents({}) == 0


def test_nodes_add_list_drain_remove_a_real_chromedriver(invoke: Invoke, chromedriver_node):
    added = invoke("nodes", "add", chromedriver_node, "--slots", "3")
    assert added.exit_code == 0, added.output
    assert "chromedriver, 3 slot(s)" in one_line(added)
    listed = invoke("nodes", "list", "--json")
    assert '"state": "up"' in listed.output and '"capacity": 3' in listed.output
    assert invoke("nodes", "drain", chromedriver_node).exit_code == 0
    assert '"state": "draining"' in invoke("nodes", "list", "--json").output
    assert invoke("nodes", "remove", chromedriver_node).exit_code == 0
    assert invoke("nodes", "list", "--json").output.strip() == ""
