"""`crawlsched demo`: seed, tick once, crawl a local social network and news site, show
progress, check nothing is lost."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import typer
from rich.live import Live

from crawlsched.catalog import JOB_COLLECTIONS, JobState
from crawlsched.cli import demo_sites
from crawlsched.cli.common import console, err_console, labelled
from crawlsched.planning.run_names import FINISHED

DEMO_STORE = "mongomock://demo"
# How long a batch may wait for an account or a browser slot. A Chrome batch takes a few
# seconds, and the demo has fewer slots than batches: the wait must outlast several of them,
# or the one feature built to wait would show a newcomer batches "starved".
DEMO_WAIT_S = 60.0


def losses(rt: Any, runs: list[dict]) -> list[str]:
    """Everything that would mean work was lost; empty when the demo ended cleanly."""
    problems = []
    for run in runs:
        if run["state"] != FINISHED:
            problems.append(f"run {run['_id']} did not finish ({run['outstanding']} outstanding)")
        finished = sum(run.get("counts", {}).values())
        expected = run.get("planned", 0) + run.get("discovered", 0)
        if finished != expected:
            problems.append(
                f"run {run['_id']}: planned {run['planned']} and discovered "
                f"{run.get('discovered', 0)}, but {finished} ended"
            )
    for collection in JOB_COLLECTIONS:
        stuck = rt.jobs(collection).summary().get(str(int(JobState.RUNNING)), 0)
        if stuck:
            problems.append(f"{stuck} {collection} jobs still running")
    for pool, row in rt.inventory.overview(rt.now()).items():
        if row["held"]:
            problems.append(f"{row['held']} {pool} leases still held")
    if waiting := rt.waiting.all():
        problems.append(f"{len(waiting)} batches still waiting for a resource")
    return problems


def register(app: typer.Typer) -> None:
    demo_app = typer.Typer()
    demo_sites.register(demo_app)
    app.add_typer(demo_app, name="demo")

    @demo_app.callback(invoke_without_command=True)
    def demo(
        ctx: typer.Context,
        timeout: float = typer.Option(120.0, min=1, help="Give up (and fail) after this long."),
        threads: int = typer.Option(4, min=1, max=32, help="In-process worker threads."),
    ) -> None:
        """Run the whole system in one process on embedded defaults (no services needed).

        Serves a small social network and a news site on 127.0.0.1, seeds profiles and
        websites in all four resource categories, fires both sweeps once, crawls them (pages
        found while crawling included) with an in-process dramatiq worker, and exits non-zero
        if any job or lease was lost. `crawlsched demo serve-sites` serves only the two sites.
        """
        if ctx.invoked_subcommand is not None:
            return
        from dramatiq import Worker

        from crawlsched.brokers import setup_broker
        from crawlsched.cli.discovery import depth_table
        from crawlsched.demo.forward_proxy import ForwardProxy
        from crawlsched.demo.node import LocalChromedriver
        from crawlsched.demo.report import (
            NEXT_STEPS,
            binding_problems,
            bindings_table,
            crawled_table,
            final_report,
            live_frame,
            queue_depths,
            summary_line,
        )
        from crawlsched.demo.seed import (
            DEMO_PROXY_ADDRESSES,
            DEMO_PROXY_BINDINGS,
            demo_accounts,
            demo_handles,
            seed_crawl_demo,
        )
        from crawlsched.demo.social import DemoSocialNetwork
        from crawlsched.demo.website import DemoWebsite
        from crawlsched.flow.views import by_depth
        from crawlsched.resources.secrets import generate_key
        from crawlsched.runtime import get_runtime
        from crawlsched.settings import Settings
        from crawlsched.store.client import drop_embedded

        settings = Settings(
            mongo_url=DEMO_STORE,
            broker_url="stub://",
            log_format="console",
            log_level="ERROR",
            # A throw-away key: the demo's store lives only as long as this process.
            secret_key=generate_key(),
            # Batches that find no free account or node wait this long, then starve.
            admission_wait_s=DEMO_WAIT_S,
            browser_host_resolver_rules="MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            # The demo site runs on loopback: admitted explicitly, nothing else private is.
            target_allow_networks=["127.0.0.1/32"],
            # And its chromedriver, a Selenium node on loopback.
            node_allow_networks=["127.0.0.1/32"],
            # Its sites are its own, on this machine: no per-host delay.
            host_delay_s=0.0,
            # Its proxies, on loopback too (each leaving from an address of its own).
            proxy_allow_networks=["127.0.0.1/32"],
        )
        drop_embedded(DEMO_STORE)
        broker = setup_broker(settings)
        from crawlsched.actors import ticker

        rt = get_runtime()
        started = time.perf_counter()
        node = LocalChromedriver() if LocalChromedriver.available() else None
        if node is None:
            console.print(
                "chromedriver not found: batches that need a Selenium node will wait "
                f"{DEMO_WAIT_S:.0f} s and starve (Debian: apt-get install chromium chromium-driver)"
            )
        # Live frames only on a terminal. Piped or redirected, the output is plain lines and the
        # tables are printed once, at the end.
        live_view = console.is_terminal
        # The network bans an account seen from two addresses, or an address used by two
        # accounts: the twitter accounts go out through a proxy each, bound to it.
        network = DemoSocialNetwork(
            demo_handles(), demo_accounts(), ban_moving_accounts=True, max_accounts_per_address=1
        )
        proxies = {name: ForwardProxy(address) for name, address in DEMO_PROXY_ADDRESSES.items()}
        with contextlib.ExitStack() as running:
            for proxy in proxies.values():
                running.enter_context(proxy)
            running.enter_context(network)
            site = running.enter_context(DemoWebsite())
            if node is not None:
                running.enter_context(node)
            proxy_urls = {name: proxy.url for name, proxy in proxies.items()}
            seeded = seed_crawl_demo(
                rt, network.base_url, site.base_url, node.url if node else None, proxy_urls
            )
            console.print(
                f"social network at {network.base_url}, news site at {site.base_url}; seeded "
                f"{seeded['profiles']} profile jobs and {seeded['websites']} website jobs; "
                "firing both sweeps"
            )
            for schedule in rt.schedules.all():
                rt.schedules.fire_now(schedule["_id"], rt.now())
            if not live_view:
                console.print("crawling; the tables follow when every run has finished")
            worker = Worker(broker, worker_threads=threads)
            worker.start()
            try:
                ticker.tick.send()
                last_tick = time.perf_counter()
                seen_queues: set[str] = set()
                live = Live(console=console, refresh_per_second=8, transient=True)
                with live if live_view else contextlib.nullcontext():
                    while True:
                        runs = rt.runs.recent()
                        if live_view:
                            elapsed = time.perf_counter() - started
                            depths = queue_depths(broker)
                            waiting = len(rt.waiting.all())
                            frame = live_frame(runs, depths, waiting, elapsed, seen_queues)
                            live.update(frame)
                        done = runs and all(r["state"] == FINISHED for r in runs)
                        if done or time.perf_counter() - started > timeout:
                            break
                        if time.perf_counter() - last_tick > 1:
                            ticker.tick.send()  # the clock: starves overdue waits
                            last_tick = time.perf_counter()
                        time.sleep(0.1)
            finally:
                worker.stop()
        runs = rt.runs.recent()
        for part in final_report(runs):
            console.print(part)
        console.print(crawled_table(rt, runs))
        seen = dict(network.address_of_requests)
        console.print(
            bindings_table(seen, network.logins, DEMO_PROXY_BINDINGS, DEMO_PROXY_ADDRESSES)
        )
        for run in runs:
            if run.get("discovered"):
                table = depth_table(by_depth(rt, run))
                table.title = f"Pages per depth: {run['schedule_id']}"
                console.print(table)
        console.print(f"elapsed {time.perf_counter() - started:.1f} s")
        lost = losses(rt, runs) if runs else ["no run was planned"]
        lost += binding_problems(
            seen, dict(network.banned), DEMO_PROXY_BINDINGS, DEMO_PROXY_ADDRESSES
        )
        if lost:
            for line in lost:
                err_console.print(labelled("LOST:", "red", line))
            raise typer.Exit(1)
        console.print(summary_line(runs), style="green")
        console.print("no job left running, no lease held, no batch waiting", style="green")
        console.print(NEXT_STEPS, highlight=False)
