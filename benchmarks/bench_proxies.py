"""bench_proxies: accounts bound to proxies on a network that bans accounts that move.

The demo social network (`crawlsched.demo.social`) on 127.0.0.1, with `ban_moving_accounts`
and `max_accounts_per_address=1`: it bans an account seen from two addresses, and an account
seen from an address another account already used. One `ForwardProxy` per account, each
leaving from its own address (127.0.0.21, .22, ...; the first asks for credentials). The
`friend` task of `twitter` (a login, then the followers and followings lists, page after page
as each page links the next: several batches per account) over `--handles` handles, crawled
by in-process worker threads (stub broker, a fresh embedded store and a fresh network each
run), three runs in one process:

1. bound: `twitter` goes out through proxies (`ProxyRow(block_markers=["proxy-blocked"])`),
   each account bound to its own proxy;
2. unbound: the same, no binding: an account takes any free proxy for each batch, so the
   network sees it move, and bans it (the bans are real);
3. direct: the same media with no proxy row, no proxy, no ban rule (the baseline).

Figures (the JSON line last): bans in runs 1 and 2, requests of run 1 that reached the
network from an address other than the account's bound proxy's (cross-checked against the
proxies' own logs), pages lost in run 1, logins per admitted batch, pages/s of run 1 ÷ pages/s
of run 3, and, on a bare `ResourcePools` loop under contention, acquire attempts per granted
batch with three needs (account, browser slot, proxy) and with two (account, browser slot).

    .venv/bin/python benchmarks/bench_proxies.py [--accounts 4] [--handles 24] [--seed 1]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks._proxy_admission import compare  # noqa: E402
from crawlsched.catalog import JobState  # noqa: E402
from crawlsched.demo.forward_proxy import ForwardProxy  # noqa: E402
from crawlsched.demo.seed import crawl_reference  # noqa: E402
from crawlsched.demo.social import DemoSocialNetwork  # noqa: E402
from crawlsched.planning.outcomes import Outcome  # noqa: E402
from crawlsched.planning.run_names import FINISHED, run_id_for  # noqa: E402
from crawlsched.reference import ProxyRow  # noqa: E402
from crawlsched.resources.rules import AccountLimits  # noqa: E402

MEDIA = "twitter"
TASK = "friend"
PROXY_USER, PROXY_PASSWORD = "proxy-user", "proxy-pw"
LOOPBACK = ["127.0.0.1/32"]
TICK_S = 0.5  # as tests/test_proxy_flow.py's clock
# Ends that say what became of a page: anything else planned or discovered is lost.
ACCOUNTED = (
    Outcome.SUCCEEDED, Outcome.EXHAUSTED, Outcome.EXPIRED, Outcome.GIVEN_UP, Outcome.STARVED,
)  # fmt: skip


def proxy_address(n: int) -> str:
    return f"127.0.0.{21 + n}"


# ---- the three crawls --------------------------------------------------------------------------


def start_pipeline(url: str, threads: int, proxied: bool):
    """A stub broker and worker threads on a fresh embedded store, as tests/conftest.py's
    `stub_pipeline` starts them."""
    from dramatiq import Worker

    from crawlsched.brokers import setup_broker
    from crawlsched.runtime import get_runtime
    from tests.conftest import settings_for_tests

    settings = settings_for_tests(
        mongo_url=url,
        broker_url="stub://",
        log_level="ERROR",
        metrics_enabled=False,
        admission_wait_s=600,
        target_allow_networks=LOOPBACK,
        **({"proxy_allow_networks": LOOPBACK} if proxied else {}),
    )
    broker = setup_broker(settings)
    import crawlsched.actors  # noqa: F401  (declares every actor on this broker)

    broker.flush_all()
    worker = Worker(broker, worker_timeout=100, worker_threads=threads)
    worker.start()
    return broker, worker, get_runtime()


def load_reference(rt, net, proxy: ProxyRow | None, batch_limit: int) -> int:
    reference = crawl_reference(net.base_url)
    media = [m if m.name != MEDIA else _media(m, proxy, batch_limit) for m in reference.media]
    rt.create_indexes()
    rt.reference.load(reference.model_copy(update={"media": media}))
    return rt.reference.media_by_name(MEDIA)["_id"]


def _media(row, proxy: ProxyRow | None, batch_limit: int):
    task = row.tasks[TASK].model_copy(update={"batch_limit": batch_limit})
    return row.model_copy(update={"proxy": proxy, "tasks": {**row.tasks, TASK: task}})


def fire(rt, media_id: int, handles: list[str], schedule_id: str) -> str:
    from crawlsched.actors.planner import plan_crawls
    from crawlsched.flow import schedule_ops

    now = rt.now()
    fire_at = now - timedelta(seconds=1)
    rt.jobs("profiles").insert_new(
        [
            {
                "target": handle,
                "media_name": MEDIA,
                "media_name_id": media_id,
                "task": TASK,
                "state": int(JobState.PENDING),
                "enabled": True,
                "execution_date": fire_at,
                "attempt_count": 0,
                "interval_s": 3600,
            }
            for handle in handles
        ]
    )
    schedule_ops.create(
        rt, schedule_id, {"interval_s": 3600, "target_collection": "profiles", "targets": handles}
    )
    plan_crawls.send(schedule_id, fire_at.isoformat())
    return run_id_for(schedule_id, fire_at)


def wait_finished(rt, run_id: str, timeout_s: float, hopeless) -> dict | None:
    """The run once finished (None after `timeout_s`, or once `hopeless()`), ticking as the
    clock would: admission sweeps see rested proxies and freed accounts."""
    from crawlsched.actors import ticker

    deadline = next_tick = time.monotonic()
    deadline += timeout_s
    while time.monotonic() < deadline and not hopeless():
        run = rt.runs.get(run_id)
        if run is not None and run["state"] == FINISHED:
            return run
        if time.monotonic() >= next_tick:
            ticker.tick.send()
            next_tick += TICK_S
        time.sleep(0.05)
    return None


def crawl(kind: str, accounts: dict[str, str], handles: list[str], args) -> dict:
    """One run on a fresh store, a fresh network and fresh proxies; what it measured."""
    from crawlsched.store.client import drop_embedded

    proxied, bound = kind in ("bound", "unbound"), kind == "bound"
    names = [f"p{n + 1}" for n in range(len(accounts))] if proxied else []
    proxies = {
        name: ForwardProxy(proxy_address(n), *((PROXY_USER, PROXY_PASSWORD) if n == 0 else ()))
        for n, name in enumerate(names)
    }
    binding = dict(zip(accounts, names, strict=True)) if bound else {}
    net = DemoSocialNetwork(
        handles, accounts, seed=args.seed,
        ban_moving_accounts=proxied, max_accounts_per_address=1 if proxied else None,
    )  # fmt: skip
    url = f"mongomock://bench-proxies-{kind}-{uuid.uuid4().hex[:8]}"
    with contextlib.ExitStack() as stack:
        stack.callback(drop_embedded, url)
        stack.enter_context(net)
        for proxy in proxies.values():
            stack.enter_context(proxy)
        broker, worker, rt = start_pipeline(url, args.threads, proxied)
        stack.callback(broker.close)
        stack.callback(broker.flush_all)
        stack.callback(worker.stop)
        proxy_row = ProxyRow(block_markers=["proxy-blocked"]) if proxied else None
        media_id = load_reference(rt, net, proxy_row, args.batch_limit)
        now = rt.now()
        for n, (name, proxy) in enumerate(proxies.items()):
            credentials = (PROXY_USER, PROXY_PASSWORD) if n == 0 else (None, None)
            rt.proxies.add_proxy(name, proxy.url, now, "home", 0, 1, *credentials)
        for username, password in accounts.items():
            rt.inventory.add_account(MEDIA, username, password, AccountLimits(), now)
            if username in binding:
                rt.proxies.bind_account(MEDIA, username, binding[username], None, now)
        started = time.perf_counter()
        run_id = fire(rt, media_id, handles, f"bench-proxies-{kind}")
        # Once every account is banned, nothing more of the run can succeed: stop waiting.
        run = wait_finished(
            rt,
            run_id,
            args.unbound_timeout if kind == "unbound" else args.timeout,
            lambda: len(net.banned) == len(accounts),
        )
        elapsed = time.perf_counter() - started
        if run is None:
            run = rt.runs.get(run_id) or {}
        address_of = {user: dict(by) for user, by in net.address_of_requests.items()}
        return {
            "run": kind,
            "finished": run.get("state") == FINISHED,
            "seconds": round(elapsed, 2),
            "pages": int(run.get("planned", 0)) + int(run.get("discovered", 0)),
            "counts": dict(run.get("counts", {})),
            "admitted_batches": rt.db.run_resources.count_documents({}),
            "banned": dict(net.banned),
            "logins": sum(net.logins.values()),
            "address_of_requests": address_of,
            "off_binding": off_binding(address_of, binding, proxies),
            "proxy_check": proxy_logs_check(address_of, proxies),
            "proxy_auth_refused": sum(p.refused for p in proxies.values()),
        }


def off_binding(address_of: dict, binding: dict, proxies: dict) -> int | None:
    """Requests by a bound account that reached the network from another address than its
    proxy's outgoing one (None when no account is bound)."""
    if not binding:
        return None
    return sum(
        n
        for user, by in address_of.items()
        for address, n in by.items()
        if user not in binding or address != proxies[binding[user]].outgoing_address
    )


def proxy_logs_check(address_of: dict, proxies: dict) -> dict:
    """The same traffic as the proxies logged it: per proxy, the requests an account made
    through it (logins, and requests carrying a session cookie) against what the network
    counted from its outgoing address; session cookies seen through two proxies; and how many
    sessions went through each proxy (one each when every account keeps its proxy and its
    login)."""
    sessions_at: dict[str, set[str]] = {}
    mismatch = 0
    for name, proxy in proxies.items():
        log = proxy.log
        by_account = sum(1 for r in log if r.path == "/login" or session_of(r.cookie))
        network = sum(by.get(proxy.outgoing_address, 0) for by in address_of.values())
        mismatch += abs(by_account - network)
        for r in log:
            if token := session_of(r.cookie):
                sessions_at.setdefault(token, set()).add(name)
    per_proxy = {name: sum(1 for seen in sessions_at.values() if name in seen) for name in proxies}
    return {
        "request_count_mismatch": mismatch,
        "sessions_on_two_proxies": sum(1 for seen in sessions_at.values() if len(seen) > 1),
        "sessions_per_proxy": per_proxy,
    }


def session_of(cookie: str | None) -> str | None:
    for part in (cookie or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == "session" and value:
            return value
    return None


# ---- main ---------------------------------------------------------------------------------------


def row(r: dict) -> str:
    per_s = r["pages"] / r["seconds"] if r["seconds"] else 0.0
    addresses = sorted({a for by in r["address_of_requests"].values() for a in by})
    return (
        f"{r['run']:<8} finished={r['finished']!s:<5} pages={r['pages']:<4} "
        f"counts={r['counts']} {r['seconds']:6.2f}s {per_s:7.1f} pages/s "
        f"batches={r['admitted_batches']:<3} logins={r['logins']:<3} "
        f"banned={len(r['banned'])} addresses={addresses}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--accounts", type=int, default=4)
    parser.add_argument("--handles", type=int, default=24)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--batch-limit", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--unbound-timeout", type=float, default=40.0)
    parser.add_argument("--admission-batches", type=int, default=200)
    args = parser.parse_args()
    if not 1 <= args.accounts <= 200:
        raise SystemExit("--accounts: 1 to 200 (one outgoing address 127.0.0.21+ each)")
    accounts = {f"acct{n + 1}": f"pw-{n + 1}" for n in range(args.accounts)}
    handles = [f"user{n:03d}" for n in range(args.handles)]

    runs = {}
    for kind in ("bound", "unbound", "direct"):
        runs[kind] = crawl(kind, accounts, handles, args)
        print(row(runs[kind]), flush=True)
    admission = compare(args.accounts, args.admission_batches, args.seed)
    for needs, a in admission.items():
        print(
            f"admission, {needs} needs: {a['attempts_per_grant']:.3f} acquire attempts, "
            f"{a['commands_per_grant']:.2f} store commands and {a['ms_per_grant']:.2f} ms "
            "a granted batch (its release included)",
            flush=True,
        )

    bound, unbound = runs["bound"], runs["unbound"]
    if not unbound["banned"]:
        print(
            "warning: no account moved in the unbound run (the pools turned in step): "
            "try another --seed or a smaller --batch-limit",
            file=sys.stderr,
        )
    accounted = sum(int(bound["counts"].get(o, 0)) for o in ACCOUNTED)
    rate = {k: r["pages"] / r["seconds"] for k, r in runs.items() if r["seconds"]}
    print(
        json.dumps(
            {
                "bench": "proxies",
                "accounts": args.accounts,
                "handles": args.handles,
                "seed": args.seed,
                "accounts_banned_bound": len(bound["banned"]),
                "accounts_banned_unbound": len(unbound["banned"]),
                "ban_reasons_unbound": sorted(set(unbound["banned"].values())),
                "accounts_moved_unbound": sum(
                    1 for by in unbound["address_of_requests"].values() if len(by) > 1
                ),
                "unbound_run_finished": unbound["finished"],
                "requests_off_bound_proxy": bound["off_binding"],
                "proxy_log_request_mismatch_bound": bound["proxy_check"]["request_count_mismatch"],
                "sessions_on_two_proxies_bound": bound["proxy_check"]["sessions_on_two_proxies"],
                "sessions_per_proxy_bound": bound["proxy_check"]["sessions_per_proxy"],
                "proxy_auth_refused_bound": bound["proxy_auth_refused"],
                "pages_bound": bound["pages"],
                "pages_lost": bound["pages"] - accounted,
                "logins_per_batch": round(bound["logins"] / max(bound["admitted_batches"], 1), 3),
                "pages_per_s_proxied_over_direct": round(rate["bound"] / rate["direct"], 3),
                "admission_passes_per_batch_three_needs": round(
                    admission["three"]["attempts_per_grant"], 3
                ),
                "admission_passes_per_batch_two_needs": round(
                    admission["two"]["attempts_per_grant"], 3
                ),
                "admission_commands_per_batch_three_needs": round(
                    admission["three"]["commands_per_grant"], 2
                ),
                "admission_commands_per_batch_two_needs": round(
                    admission["two"]["commands_per_grant"], 2
                ),
                "admission_ms_per_batch_three_over_two": round(
                    admission["three"]["ms_per_grant"] / admission["two"]["ms_per_grant"], 3
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
