"""A caller of the API reaches the store only, against a real `crawlsched standalone`: no route
runs a command, takes a path on the server or one of its environment variables; files travel
as uploads (admin only, refused unread with a read token) and downloads, and a dump unpacks
within its bound. Each attack is judged by its victim's own record: the file on disk
unchanged, the folder never made, the account never added, the listener never connected to,
the store as it was, the disk not filled.
"""

from __future__ import annotations

import gzip
import io
import json
import socket
import tarfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from crawlsched.archives import untar_bounded
from crawlsched.reference import load_reference
from tests.support.standalone import Standalone, standalone_env

CANARY = "canary-value-7f3e9a"
UNPACK_LIMIT = 4 * 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Standalone]:
    # No network allowed to crawls (loopback included): what the server reaches for a caller
    # must follow the same rules.
    data = tmp_path_factory.mktemp("remote-boundary") / "data"
    env = standalone_env(
        data,
        CANARY_SECRET=CANARY,
        CRAWLSCHED_TARGET_ALLOW_NETWORKS="[]",
        CRAWLSCHED_API_MAX_UNPACKED_BYTES=str(UNPACK_LIMIT),
    )
    with Standalone(env) as started:
        yield started


def api_of(server: Standalone) -> dict:
    return json.loads((server.data_dir / "api.json").read_text())


def call(server: Standalone, method: str, path: str, token: str | None = None, **kw):
    api = api_of(server)
    headers = {"Authorization": f"Bearer {token or api['token']}", **kw.pop("headers", {})}
    return httpx.request(method, f"{api['url']}{path}", headers=headers, timeout=120, **kw)


@pytest.fixture(scope="module")
def read_token(server: Standalone) -> str:
    return server.json_lines("tokens", "create", "--role", "read", "--name", "r")[0]["token"]


def jobs_summary(server: Standalone) -> list[dict]:
    return server.json_lines("jobs", "summary")


def usernames(server: Standalone) -> list[str]:
    return [a["username"] for a in server.json_lines("accounts", "list")]


def test_no_route_runs_a_command(server):
    paths = httpx.get(f"{api_of(server)['url']}/openapi.json", timeout=30).json()["paths"]
    assert not [p for p in paths if "cli" in p]
    answer = call(server, "POST", "/v1/cli", json={"argv": ["stats", "--json"]})
    assert answer.status_code in (404, 405)


def test_an_upload_with_a_read_token_is_refused_and_imports_nothing(server, read_token):
    before = jobs_summary(server)
    rows = b"kind,media,target\nprofile,twitter,reader-bob\n"
    refused = call(server, "POST", "/v1/imports?format=csv", read_token, content=rows)
    assert refused.status_code == 403 and "admin" in refused.json()["detail"]
    assert jobs_summary(server) == before


def test_rejected_rows_come_back_in_the_answer_never_written_on_the_server(server, tmp_path):
    rows = b"kind,media,target\nprofile,myspace,eve\nprofile,twitter,remote-bob\n"
    answer = call(server, "POST", "/v1/imports?format=csv", content=rows)
    assert answer.status_code == 200, answer.text
    lines = [json.loads(line) for line in answer.text.splitlines()]
    [rejected] = [line["rejected"] for line in lines if "rejected" in line]
    assert rejected["line"] == 2 and "myspace" in rejected["reason"]
    assert lines[-1]["report"]["inserted"] == 2  # bob's profile and publication


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/accounts", {"media": "twitter", "username": "eve", "secret_env": "CANARY_SECRET"},
         "secret_env"),
        ("/v1/accounts", {"media": "twitter", "username": "eve", "secret_file": "/etc/passwd"},
         "secret_file"),
        ("/v1/reference", {"reference": "/etc/crawlsched/reference.yaml"}, "reference"),
        ("/v1/reference", {"path": "/etc/crawlsched/reference.yaml"}, "path"),
    ],
)  # fmt: skip
def test_no_route_takes_a_server_path_or_environment_variable(server, path, body, field):
    answer = call(server, "POST", path, json=body)
    assert answer.status_code == 422, answer.text
    assert field in answer.text and CANARY not in answer.text
    assert "eve" not in usernames(server)


def test_a_reference_is_sent_as_data_and_checked_there(server):
    data = load_reference().model_dump(mode="json")
    twin = {**next(m for m in data["media"] if m["name"] == "twitter"), "name": "leaked"}
    data["media"].append(twin)  # the same id twice
    refused = call(server, "POST", "/v1/reference", json={"reference": data})
    assert refused.status_code == 422 and "duplicate media id" in refused.json()["detail"]
    assert "leaked" not in {m["name"] for m in server.json_lines("media", "list")}


def test_a_dump_comes_back_as_a_stream_and_unpacks_here(server, tmp_path):
    with httpx.stream(
        "GET",
        f"{api_of(server)['url']}/v1/store/dump",
        headers={"Authorization": f"Bearer {api_of(server)['token']}"},
        timeout=120,
    ) as answer:
        assert answer.status_code == 200
        untar_bounded(answer.iter_bytes(), tmp_path / "here", UNPACK_LIMIT)
    assert (tmp_path / "here" / "crawlsched" / "schedules.bson").stat().st_size > 0


def bomb(size: int) -> bytes:
    """A gzipped tar of one file of `size` zero bytes: a few kilobytes that say `size`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("crawlsched/schedules.bson")
        info.size = size
        tar.addfile(info, io.BytesIO(bytes(size)))
    return buffer.getvalue()


def test_a_load_that_unpacks_past_its_bound_is_refused_and_changes_nothing(server):
    # Given an archive of 32 MB of zeros, a few kilobytes gzipped (the unpack limit: 4 MB)
    archive = bomb(8 * UNPACK_LIMIT)
    assert len(archive) < 64 * 1024
    before = server.json_lines("schedules", "list")
    disk_before = free_bytes(server.data_dir)
    answer = call(server, "POST", "/v1/store/load?drop=true", content=archive)
    assert answer.status_code == 400, answer.text
    assert "unpacks to more than" in answer.json()["detail"]
    assert server.json_lines("schedules", "list") == before
    assert free_bytes(server.data_dir) > disk_before - 2 * UNPACK_LIMIT


def free_bytes(path: Path) -> int:
    import os

    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


@pytest.mark.parametrize(
    "archive",
    [b"not gzip at all", gzip.compress(b"not a tar")],
    ids=["not gzip", "not tar"],
)
def test_a_load_of_something_else_than_a_dump_is_one_400(server, archive):
    answer = call(server, "POST", "/v1/store/load", content=archive)
    assert answer.status_code == 400 and "internal" not in answer.text


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback TCP listener that records whether anything connected."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    try:
        yield sock
    finally:
        sock.close()


def connected(sock: socket.socket) -> bool:
    try:
        sock.accept()[0].close()
    except BlockingIOError:
        return False
    return True


def test_a_node_is_probed_only_where_a_node_may_be(server, listener):
    # A node's address follows the one address rule for every caller, local or remote: bad
    # input, naming the setting that would allow it.
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    answer = call(server, "POST", "/v1/nodes", json={"url": url})
    assert answer.status_code == 400, answer.text
    detail = answer.json()["detail"]
    assert "loopback" in detail and "CRAWLSCHED_NODE_ALLOW_NETWORKS" in detail
    assert not connected(listener)
    assert server.json_lines("nodes", "list") == []
    # The command line beside the server says the same, in one line
    done = server.cli("nodes", "add", url, check=False)
    assert done.returncode == 2 and "loopback" in done.stderr and not connected(listener)


def test_a_webhook_to_a_refused_address_is_refused_when_the_schedule_is_made(server, listener):
    hook = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    body = {"id": "hooked", "interval_s": 3600, "collections": ["websites"], "webhook": hook}
    response = call(server, "POST", "/v1/schedules", json=body)
    assert response.status_code == 400 and "loopback" in response.json()["detail"]
    assert "hooked" not in {s["_id"] for s in server.json_lines("schedules", "list")}
    assert not connected(listener)


def test_the_command_line_beside_the_server_sends_its_own_files(server, tmp_path):
    # Secrets are read here, from a file or this shell's variable, and sent in the request
    secret = tmp_path / "secret"
    secret.write_text("alice-password\n")
    server.cli("accounts", "add", "twitter", "alice", "--secret-file", str(secret))
    server.cli("accounts", "add", "twitter", "carol", "--secret-env", "CAROL", CAROL="pw")
    assert {"alice", "carol"} <= set(usernames(server))
    # A file of rows goes up; every rejected row comes back into a file written here
    rows = tmp_path / "rows.csv"
    rows.write_text("kind,media,target\nprofile,myspace,eve\nprofile,twitter,dan\n")
    rejects = tmp_path / "rejects.jsonl"
    server.cli("jobs", "import", str(rows), "--rejects", str(rejects))
    [rejected] = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert rejected["line"] == 2 and "myspace" in rejected["reason"]
    # A dump comes down into a folder here; a folder goes up to be loaded
    dump = tmp_path / "dump"
    server.cli("store", "dump", str(dump))
    assert (dump / "crawlsched" / "accounts.bson").stat().st_size > 0
    folder = tmp_path / "one" / "crawlsched"
    folder.mkdir(parents=True)
    (dump / "crawlsched" / "accounts.bson").rename(folder / "copied_accounts.bson")
    loaded = server.cli("store", "load", str(tmp_path / "one"))
    assert f"{len(usernames(server))} documents loaded into 1 collections" in loaded.stdout


def test_a_load_with_drop_keeps_the_server_s_tokens(server, tmp_path, read_token):
    # Given a dump holding the tokens of its own store (none of this server's)
    dump = tmp_path / "dump"
    server.cli("store", "dump", str(dump))
    tokens = dump / "crawlsched" / "api_tokens.bson"
    tokens.write_bytes(b"")  # a dump whose tokens are not this server's
    # When it is loaded with --drop through the server
    loaded = server.cli("store", "load", str(dump), "--drop")
    assert "the server's API tokens were kept" in loaded.stdout
    # Then every client's token still works
    assert call(server, "GET", "/v1/stats", read_token).status_code == 200
