"""A remote command reaches the store only: `POST /v1/cli` with an admin token, as an attacker
on the same machine would send it to `crawlsched standalone`, names the server's files, its
environment and addresses the target rules refuse. Each attack is judged by its victim's own
record: the file on disk unchanged, the folder never made, the account never added, the
listener never connected to, the store as it was. Each refusal is one 400 naming what to do.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from crawlsched.invocation import unpack_folder
from crawlsched.reference import load_reference
from tests.support.standalone import Standalone, standalone_env

CANARY = "canary-value-7f3e9a"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Standalone]:
    # No network allowed to crawls (loopback included): what the server reaches for a caller
    # must follow the same rules.
    data = tmp_path_factory.mktemp("remote-boundary") / "data"
    env = standalone_env(data, CANARY_SECRET=CANARY, CRAWLSCHED_TARGET_ALLOW_NETWORKS="[]")
    with Standalone(env) as started:
        yield started


def api_of(server: Standalone) -> dict:
    return json.loads((server.data_dir / "api.json").read_text())


def remote(
    server: Standalone,
    argv: list[str],
    uploads: dict[str, str] | None = None,
    downloads: list[str] | None = None,
) -> httpx.Response:
    """`crawlsched ARGV` sent straight to the API with the server's admin token."""
    api = api_of(server)
    return httpx.post(
        f"{api['url']}/v1/cli",
        json={"argv": argv, "uploads": uploads or {}, "downloads": downloads or []},
        headers={"Authorization": f"Bearer {api['token']}"},
        timeout=120,
    )


def refused(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    assert "internal error" not in response.text
    return response.json()["detail"]


def jobs_summary(server: Standalone) -> list[dict]:
    return server.json_lines("jobs", "summary")


def usernames(server: Standalone) -> list[str]:
    return [a["username"] for a in server.json_lines("accounts", "list")]


def victim_file(tmp_path: Path, name: str, text: str) -> tuple[Path, str, int]:
    path = tmp_path / name
    path.write_text(text)
    return path, text, path.stat().st_mtime_ns


def unchanged(path: Path, text: str, mtime_ns: int) -> bool:
    return path.read_text() == text and path.stat().st_mtime_ns == mtime_ns


def test_remote_rejects_cannot_overwrite_a_server_file(server, tmp_path):
    victim = victim_file(tmp_path, "authorized_keys", "ssh-ed25519 AAAA keep-me\n")
    before = jobs_summary(server)
    rows = "kind,media,target\nprofile,twitter,remote-bob\nprofile,myspace,eve\n"
    response = remote(
        server,
        ["jobs", "import", "@upload:rows.csv", "--rejects", str(victim[0])],
        uploads={"rows.csv": rows},
    )
    assert "--rejects" in refused(response) and "@upload:" in response.json()["detail"]
    assert unchanged(*victim)
    assert jobs_summary(server) == before  # nothing imported either


def test_remote_rejects_still_come_back_as_a_download(server):
    rows = "kind,media,target\nprofile,myspace,eve\n"
    response = remote(
        server,
        ["jobs", "import", "@upload:rows.csv", "--rejects", "@upload:rejects.jsonl"],
        uploads={"rows.csv": rows},
        downloads=["rejects.jsonl"],
    )
    assert response.status_code == 200, response.text
    [rejected] = response.json()["downloads"]["rejects.jsonl"].splitlines()
    assert "myspace" in rejected


def test_remote_import_cannot_read_a_server_file(server, tmp_path):
    path, _, _ = victim_file(tmp_path, "rows.csv", "kind,media,target\nprofile,twitter,bob-x\n")
    before = jobs_summary(server)
    assert "FILE" in refused(remote(server, ["jobs", "import", str(path)]))
    assert jobs_summary(server) == before


def test_remote_secret_file_cannot_read_a_server_file(server, tmp_path):
    path, _, _ = victim_file(tmp_path, "token", "the-servers-own-secret\n")
    response = remote(server, ["accounts", "add", "twitter", "mallory", "--secret-file", str(path)])
    assert "--secret-file" in refused(response)
    assert "mallory" not in usernames(server)


def test_remote_secret_env_is_refused_without_saying_whether_it_exists(server):
    answers = [
        remote(server, ["accounts", "add", "twitter", "eve", "--secret-env", name])
        for name in ("CANARY_SECRET", "NO_SUCH_VARIABLE_HERE")
    ]
    details = [refused(answer) for answer in answers]
    assert details[0] == details[1] and "environment" in details[0]
    assert all(CANARY not in answer.text for answer in answers)
    assert "eve" not in usernames(server)


def test_remote_store_dump_cannot_write_a_server_folder(server, tmp_path):
    target = tmp_path / "dumped"
    assert "FOLDER" in refused(remote(server, ["store", "dump", str(target)]))
    assert not target.exists()


def test_remote_store_dump_comes_back_as_a_download(server, tmp_path):
    response = remote(server, ["store", "dump", "@upload:dump"], downloads=["dump"])
    assert response.status_code == 200 and response.json()["exit_code"] == 0, response.text
    unpack_folder(response.json()["downloads"]["dump"], tmp_path / "here")
    assert (tmp_path / "here" / "crawlsched" / "schedules.bson").stat().st_size > 0


def test_remote_store_load_cannot_read_a_server_folder(server, tmp_path):
    # Given a dump on the server's disk without the schedule added after it
    response = remote(server, ["store", "dump", "@upload:dump"], downloads=["dump"])
    unpack_folder(response.json()["downloads"]["dump"], tmp_path / "old")
    server.cli("schedules", "add", "added-after", "--every", "3600", "--collection", "websites")
    # When a remote caller asks the server to load it over the store
    detail = refused(remote(server, ["store", "load", str(tmp_path / "old"), "--drop"]))
    # Then it is refused and the store still holds what it held
    assert "FOLDER" in detail
    assert "added-after" in {s["_id"] for s in server.json_lines("schedules", "list")}


def test_remote_reference_cannot_read_a_server_file(server, tmp_path):
    data = load_reference().model_dump(mode="json")
    twin = {**next(m for m in data["media"] if m["name"] == "twitter"), "name": "leaked"}
    data["media"].append(twin)
    path = tmp_path / "reference.yaml"
    path.write_text(yaml.safe_dump(data))
    assert "--reference" in refused(remote(server, ["init-db", "--reference", str(path)]))
    # The store's reference never learnt the media of that file.
    added = remote(
        server,
        ["accounts", "add", "leaked", "u", "--secret-file", "@upload:s"],
        uploads={"s": "x"},
    )
    assert added.json()["exit_code"] == 2 and "leaked" in added.json()["stderr"]


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


def test_remote_nodes_add_probes_only_where_a_node_may_be(server, listener):
    # A node's address follows the one address rule for every caller, local or remote: bad
    # input (exit 2), naming the setting that would allow it.
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    answer = remote(server, ["nodes", "add", url]).json()
    assert answer["exit_code"] == 2
    assert "loopback" in answer["stderr"]
    assert "CRAWLSCHED_NODE_ALLOW_NETWORKS" in answer["stderr"]
    assert not connected(listener)
    assert server.json_lines("nodes", "list") == []


def test_a_webhook_to_a_refused_address_is_refused_when_the_schedule_is_made(server, listener):
    api = api_of(server)
    hook = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    response = httpx.post(
        f"{api['url']}/v1/schedules",
        json={"id": "hooked", "interval_s": 3600, "collections": ["websites"], "webhook": hook},
        headers={"Authorization": f"Bearer {api['token']}"},
        timeout=60,
    )
    assert response.status_code == 400 and "loopback" in response.json()["detail"]
    assert "hooked" not in {s["_id"] for s in server.json_lines("schedules", "list")}
    assert not connected(listener)


def test_the_command_line_beside_the_server_still_sends_its_files(server, tmp_path):
    # The local CLI turns its own files into uploads and downloads: the same commands work.
    secret = tmp_path / "secret"
    secret.write_text("alice-password\n")
    server.cli("accounts", "add", "twitter", "alice", "--secret-file", str(secret))
    server.cli("accounts", "add", "twitter", "carol", "--secret-env", "CAROL", CAROL="pw")
    assert {"alice", "carol"} <= set(usernames(server))
    dump = tmp_path / "dump"
    server.cli("store", "dump", str(dump))
    assert (dump / "crawlsched" / "accounts.bson").stat().st_size > 0
    # A dump of one collection under a new name travels back as an archive and is loaded
    folder = tmp_path / "one" / "crawlsched"
    folder.mkdir(parents=True)
    (dump / "crawlsched" / "accounts.bson").rename(folder / "copied_accounts.bson")
    loaded = server.cli("store", "load", str(tmp_path / "one"))
    assert f"{len(usernames(server))} documents loaded into 1 collections" in loaded.stdout


@pytest.mark.parametrize(
    "argv", [["demo"], ["clock", "--count", "1"], ["standalone"], ["api", "serve", "--port", "0"]]
)
def test_commands_that_start_processes_are_refused_through_the_api(server, argv):
    before = child_processes(server.process.pid)
    detail = refused(remote(server, argv))
    assert "starts processes of its own" in detail
    assert child_processes(server.process.pid) == before


def child_processes(pid: int) -> set[str]:
    """The server's child processes, from every one of its threads (one may end meanwhile)."""
    found: set[str] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found.update((task / "children").read_text().split())
        except FileNotFoundError:
            continue
    return found
